import { writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { datasetPathOf } from '../../src/cli/lance-read';
import type { Campaign } from './campaign';
import { TABLE } from './campaign';
import { commitAndDataDirs } from './commit-check';
import { readSetAside } from './dead-letter-reading';
import type { Incarnations, ReadableOffsets } from './expected-offsets';
import type { FinalCheck } from './final-check-result';
import { incarnationCheck } from './incarnation-check';
import { independentProblems, readIndependently, type IndependentReading } from './independent-reader';
import { logRecords, ranges } from './log-offsets';
import type { NodeReading } from './table-reading';
import { readWithLanceDb } from './table-reading';

/**
 * The end-of-step check of items 1 and 2, after every replica stopped:
 * - rows in Lance = records in the log − distinct dead letters, and every log offset is
 *   either a row or a dead letter (the missing ones listed as ranges: loss), none both;
 * - unique (_topic, _partition, _offset); every row's payload SHA-256 equals its `sha`;
 * - the same three facts read independently with pylance;
 * - committed offsets = log end offsets;
 * - no open or sealed staging parts, no planned or `writing` ledger entries, nothing
 *   quarantined, in any replica's data dir.
 */
export async function finalCheck(
  c: Campaign,
  stalled?: string,
  options: { readonly readable?: ReadableOffsets; readonly incarnations?: Incarnations } = {},
): Promise<FinalCheck> {
  if (options.incarnations) return incarnationCheck(c, options.incarnations, stalled);
  const problems: string[] = stalled ? [`stall: ${stalled}`] : [];
  const lines: string[] = [];
  const log = await logRecords(c);
  const { dead, deadCount, setAsideCount } = readSetAside(c);
  const node = await readWithLanceDb(c);
  const produced = c.production;
  const readable = options.readable;
  const reference = referenceOffsets(log.ends, readable, problems);
  const referenceCount = [...reference.values()].reduce((n, l) => n + l.length, 0);

  lines.push(
    produced
      ? `- Records in the log: **${log.total}** (${log.ends.size} partitions; the producer had ${produced.acked()} acknowledged, ${produced.bad()} of them not JSON, ${(produced.bytes() / 1048576).toFixed(1)} MiB, ${produced.retries()} send retries)`
      : `- Offsets between the log start and end: **${log.total}** (${log.ends.size} partitions; ${[
          ...log.ends,
        ]
          .sort((a, b) => a[0] - b[0])
          .map(([p, e]) => `p${p} ${e.low}–${e.high}`)
          .join(', ')})`,
  );
  if (readable) {
    let inLog = 0;
    for (const [p, offsets] of reference) {
      const e = log.ends.get(p)!;
      inLog += offsets.filter((o) => o >= e.low && o < e.high).length;
    }
    lines.push(
      `- Readable records (${readable.reader}): **${referenceCount}**; offsets between the log start and end that hold no readable record: ${log.total - inLog}${referenceCount > inLog ? `; read below the log start before it moved: ${referenceCount - inLog}` : ''}`,
    );
  }
  lines.push(
    `- Dead letters (distinct source offsets in the replicas' dead-letter files): **${deadCount}**; publications set aside: ${setAsideCount} records`,
  );

  const { missing, both, outside, deadOutside, expected, missingLines, outsideLines, expectedRows } =
    compareWithReference(reference, node, dead);
  lines.push(`- Expected rows = ${readable ? 'readable records' : 'log'} − dead letters = **${expected}**`);
  const what = readable ? 'readable records' : 'log records';
  if (missing > 0) problems.push(`loss: ${missing} ${what} are neither rows nor dead letters`);
  if (both > 0) problems.push(`${both} records are both rows and dead letters`);
  if (outside > 0)
    problems.push(
      readable
        ? `${outside} rows at offsets the reader did not read (${outsideLines.join(' ').trim().slice(0, 300)})`
        : `${outside} rows at offsets the log does not have`,
    );
  if (deadOutside > 0)
    problems.push(
      `${deadOutside} dead letters at offsets ${readable ? 'the reader did not read' : 'outside the log'}`,
    );
  if (node.foreign > 0) problems.push(`${node.foreign} rows of another topic in the table`);
  if (setAsideCount > 0) problems.push(`${setAsideCount} records set aside in quarantined publications`);

  const verdictOf = (rows: number, dups: number, bad: number) =>
    rows === expected && dups === 0 && bad === 0 ? 'ok' : 'FAILED';
  if (node.rows !== expected) problems.push(`LanceDB for Node: ${node.rows} rows, expected ${expected}`);
  if (node.duplicates > 0)
    problems.push(
      `LanceDB for Node: ${node.duplicates} duplicate triples (${node.duplicateExamples.join(', ')})`,
    );
  if (node.mismatches > 0)
    problems.push(
      `LanceDB for Node: ${node.mismatches} checksum mismatches (${node.mismatchExamples.join(', ')})`,
    );

  const independent = await checkWithPylance(c, readable, expectedRows, expected, problems);
  lines.push(
    '',
    '| reader | rows | duplicate triples | checksum mismatches | verdict |',
    '| --- | --- | --- | --- | --- |',
    `| LanceDB for Node 0.39 | ${node.rows} | ${node.duplicates} | ${node.mismatches} | ${verdictOf(node.rows, node.duplicates, node.mismatches)} |`,
    independent
      ? `| ${independent.reader} (table version ${independent.version}) | ${independent.rows} | ${independent.duplicates} | ${independent.checksumMismatches} | ${verdictOf(independent.rows, independent.duplicates, independent.checksumMismatches)} |`
      : '| pylance | — | — | — | could not read |',
    '',
  );
  if (readable && independent?.missing !== undefined)
    lines.push(
      `- pylance against the expected (partition, offset) set: ${independent.missing} absent, ${independent.unexpected ?? 0} at offsets the reader did not read`,
    );
  lines.push(
    missing === 0
      ? readable
        ? '- Every readable offset is a row or a dead letter: nothing lost.'
        : '- Every log offset is a row or a dead letter: nothing lost.'
      : `- **Lost: ${missing} records** (neither a row nor a dead letter):`,
    ...missingLines,
  );
  if (readable)
    lines.push(
      outside === 0
        ? '- No row is at an offset the reader did not read.'
        : `- **${outside} rows at offsets the reader did not read:**`,
      ...outsideLines,
    );

  await commitAndDataDirs(c, problems, lines);
  return { problems, lines, logRecords: log.total, deadLetters: deadCount, rows: node.rows, independent };
}

/**
 * The reference: every offset from the log start to its end, or the offsets a reader
 * read from a log with gaps (a partition the reader read that the topic lacks is a problem).
 */
function referenceOffsets(
  ends: ReadonlyMap<number, { low: number; high: number }>,
  readable: ReadableOffsets | undefined,
  problems: string[],
): Map<number, number[]> {
  const reference = new Map<number, number[]>();
  for (const [p, e] of [...ends].sort((a, b) => a[0] - b[0])) {
    const set = readable?.offsets.get(p);
    reference.set(
      p,
      set
        ? [...set].sort((a, b) => a - b)
        : readable
          ? []
          : Array.from({ length: e.high - e.low }, (_, i) => e.low + i),
    );
  }
  for (const p of readable?.offsets.keys() ?? [])
    if (!reference.has(p)) problems.push(`the reader read partition ${p}, which the topic does not have`);
  return reference;
}

/** The table's and dead letters' offsets against the reference, partition by partition. */
interface Comparison {
  /** Reference offsets neither a row nor a dead letter. */
  readonly missing: number;
  /** Offsets that are both a row and a dead letter. */
  readonly both: number;
  /** Rows at offsets outside the reference. */
  readonly outside: number;
  /** Dead letters at offsets outside the reference. */
  readonly deadOutside: number;
  /** Rows the table must hold: reference − dead letters. */
  readonly expected: number;
  readonly missingLines: string[];
  readonly outsideLines: string[];
  /** partition → the offsets that must be rows (pylance's expected set). */
  readonly expectedRows: Map<number, number[]>;
}

function compareWithReference(
  reference: ReadonlyMap<number, number[]>,
  node: NodeReading,
  dead: ReadonlyMap<number, Set<number>>,
): Comparison {
  let missing = 0;
  let both = 0;
  let outside = 0;
  let deadOutside = 0;
  let expected = 0;
  const missingLines: string[] = [];
  const outsideLines: string[] = [];
  const expectedRows = new Map<number, number[]>();
  for (const [p, offsets] of reference) {
    const rows = node.offsets.get(p) ?? new Set<number>();
    const deadHere = dead.get(p) ?? new Set<number>();
    const inReference = new Set(offsets);
    const gone: number[] = [];
    const rowOffsets: number[] = [];
    for (const o of offsets) {
      const inRows = rows.has(o);
      if (inRows && deadHere.has(o)) both += 1;
      if (!inRows && !deadHere.has(o)) gone.push(o);
      if (!deadHere.has(o)) rowOffsets.push(o);
    }
    expectedRows.set(p, rowOffsets);
    expected += rowOffsets.length;
    const stray = [...rows].filter((o) => !inReference.has(o)).sort((a, b) => a - b);
    outside += stray.length;
    deadOutside += [...deadHere].filter((o) => !inReference.has(o)).length;
    missing += gone.length;
    if (gone.length > 0)
      missingLines.push(`  - p${p}: ${gone.length} offsets: ${ranges(gone).slice(0, 600)}`);
    if (stray.length > 0)
      outsideLines.push(`  - p${p}: ${stray.length} rows: ${ranges(stray).slice(0, 600)}`);
  }
  for (const [p, rows] of node.offsets)
    if (!reference.has(p)) {
      outside += rows.size;
      outsideLines.push(`  - p${p}: ${rows.size} rows of a partition the topic does not have`);
    }
  return { missing, both, outside, deadOutside, expected, missingLines, outsideLines, expectedRows };
}

/** The same facts read independently with pylance; its disagreements go to `problems`. */
async function checkWithPylance(
  c: Campaign,
  readable: ReadableOffsets | undefined,
  expectedRows: ReadonlyMap<number, number[]>,
  expected: number,
  problems: string[],
): Promise<IndependentReading | undefined> {
  let independent: IndependentReading | undefined;
  try {
    // With gaps, pylance checks the exact set too: every expected row there, none elsewhere.
    let expectedFile: string | undefined;
    if (readable) {
      expectedFile = path.join(c.o.context.workDir, 'expected-rows.json');
      writeFileSync(expectedFile, JSON.stringify(Object.fromEntries(expectedRows)));
    }
    independent = await readIndependently(
      datasetPathOf(c.lanceUri, TABLE),
      { ...c.storageOptions },
      c.topic,
      expectedFile,
    );
    problems.push(
      ...independentProblems(independent, expected, 'rows at offsets the reader did not read', 'triples'),
    );
  } catch (error) {
    problems.push(`pylance could not read the table: ${String(error).slice(0, 400)}`);
  }
  return independent;
}
