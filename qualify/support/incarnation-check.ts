import { writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { datasetPathOf } from '../../src/cli/lance-read';
import type { Campaign } from './campaign';
import { TABLE } from './campaign';
import { commitAndDataDirs } from './commit-check';
import { readSetAside } from './dead-letter-reading';
import { incarnationCount, type Incarnations } from './expected-offsets';
import type { FinalCheck } from './final-check-result';
import { independentProblems, readIndependently, type IndependentReading } from './independent-reader';
import { logRecords, ranges } from './log-offsets';
import { groupKey, readIncarnations } from './table-reading';

/**
 * The final check of a recreated topic: every expected (incarnation, partition, offset)
 * is a row, no row is anywhere else (another incarnation, an offset not expected), rows
 * unique by the 4-tuple and checksummed, the same read by pylance (`--by-topic-id
 * --expected`), no dead letter (the step produces JSON only); then committed = log end
 * of the current incarnation and clean data dirs, as for every step.
 */
export async function incarnationCheck(
  c: Campaign,
  incarnations: Incarnations,
  stalled: string | undefined,
): Promise<FinalCheck> {
  const problems: string[] = stalled ? [`stall: ${stalled}`] : [];
  const lines: string[] = [];
  const log = await logRecords(c);
  const { deadCount, setAsideCount } = readSetAside(c);
  const node = await readIncarnations(c);
  const expected = incarnationCount(incarnations);
  const short = (id: string) => id.slice(0, 8);
  lines.push(
    `- Current incarnation's log: **${log.total}** records (${[...log.ends]
      .sort((a, b) => a[0] - b[0])
      .map(([p, e]) => `p${p} ${e.low}–${e.high}`)
      .join(', ')})`,
    `- Expected rows (${incarnations.reader}): **${expected}** in ${incarnations.byTopicId.size} incarnations: ${[
      ...incarnations.byTopicId,
    ]
      .map(
        ([id, parts]) =>
          `\`${short(id)}…\` ${[...parts.values()].reduce((n, s) => n + s.size, 0)} (${[...parts]
            .sort((a, b) => a[0] - b[0])
            .map(([p, set]) => `p${p} ${ranges([...set].sort((x, y) => x - y)).slice(0, 80)}`)
            .join('; ')})`,
      )
      .join(', ')}`,
    `- Dead letters: **${deadCount}** (the step produces JSON records only); publications set aside: ${setAsideCount} records`,
  );
  if (deadCount > 0) problems.push(`${deadCount} dead letters, the step produced none`);
  if (setAsideCount > 0) problems.push(`${setAsideCount} records set aside in quarantined publications`);
  if (node.foreign > 0) problems.push(`${node.foreign} rows of another topic in the table`);

  let missing = 0;
  let outside = 0;
  const missingLines: string[] = [];
  const outsideLines: string[] = [];
  const expectedRows: Record<string, number[]> = {};
  const wanted = new Map<string, ReadonlySet<number>>();
  for (const [id, parts] of incarnations.byTopicId)
    for (const [p, set] of parts) {
      const key = groupKey(id, p);
      wanted.set(key, set);
      expectedRows[key] = [...set].sort((a, b) => a - b);
      const rows = node.offsets.get(key) ?? new Set<number>();
      const gone = expectedRows[key].filter((o) => !rows.has(o));
      missing += gone.length;
      if (gone.length > 0)
        missingLines.push(`  - ${short(id)}…/p${p}: ${gone.length}: ${ranges(gone).slice(0, 600)}`);
    }
  for (const [key, rows] of node.offsets) {
    const set = wanted.get(key);
    const stray = [...rows].filter((o) => !set?.has(o)).sort((a, b) => a - b);
    outside += stray.length;
    if (stray.length > 0) outsideLines.push(`  - ${key}: ${stray.length}: ${ranges(stray).slice(0, 600)}`);
  }
  if (missing > 0) problems.push(`loss: ${missing} expected records are not rows of their incarnation`);
  if (outside > 0)
    problems.push(
      `${outside} rows not expected in their incarnation (${outsideLines.join(' ').trim().slice(0, 300)})`,
    );
  if (node.rows - node.foreign !== expected)
    problems.push(`LanceDB for Node: ${node.rows - node.foreign} rows, expected ${expected}`);
  if (node.duplicates > 0)
    problems.push(
      `LanceDB for Node: ${node.duplicates} duplicate (_partition, _offset, _topic_id) (${node.duplicateExamples.join(', ')})`,
    );
  if (node.mismatches > 0)
    problems.push(
      `LanceDB for Node: ${node.mismatches} checksum mismatches (${node.mismatchExamples.join(', ')})`,
    );

  let independent: IndependentReading | undefined;
  try {
    const expectedFile = path.join(c.o.context.workDir, `expected-rows-${Date.now().toString(36)}.json`);
    writeFileSync(expectedFile, JSON.stringify(expectedRows));
    independent = await readIndependently(
      datasetPathOf(c.lanceUri, TABLE),
      { ...c.storageOptions },
      c.topic,
      expectedFile,
      true,
    );
    problems.push(
      ...independentProblems(independent, expected, 'rows not expected in their incarnation', '4-tuples'),
    );
  } catch (error) {
    problems.push(`pylance could not read the table: ${String(error).slice(0, 400)}`);
  }
  const verdictOf = (rows: number, dups: number, bad: number) =>
    rows === expected && dups === 0 && bad === 0 ? 'ok' : 'FAILED';
  lines.push(
    '',
    '| reader | rows | duplicate (_topic, _partition, _offset, _topic_id) | checksum mismatches | verdict |',
    '| --- | --- | --- | --- | --- |',
    `| LanceDB for Node 0.39 | ${node.rows} | ${node.duplicates} | ${node.mismatches} | ${verdictOf(node.rows, node.duplicates, node.mismatches)} |`,
    independent
      ? `| ${independent.reader} (table version ${independent.version}) | ${independent.rows} | ${independent.duplicates} | ${independent.checksumMismatches} | ${verdictOf(independent.rows, independent.duplicates, independent.checksumMismatches)} |`
      : '| pylance | — | — | — | could not read |',
    '',
  );
  if (independent?.missing !== undefined)
    lines.push(
      `- pylance against the expected (incarnation, partition, offset) set: ${independent.missing} absent, ${independent.unexpected ?? 0} not expected`,
    );
  lines.push(
    missing === 0
      ? '- Every expected record is a row of its incarnation: nothing lost.'
      : `- **Lost: ${missing} records** (not a row of their incarnation):`,
    ...missingLines,
    outside === 0
      ? '- No row outside the expected set of its incarnation.'
      : `- **${outside} rows outside the expected set of their incarnation:**`,
    ...outsideLines,
  );
  await commitAndDataDirs(c, problems, lines);
  return { problems, lines, logRecords: log.total, deadLetters: deadCount, rows: node.rows, independent };
}
