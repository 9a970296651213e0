import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { loadConsumer } from '../../src/config';
import { inspect } from '../../src/cli/inspect';
import { datasetPathOf } from '../../src/cli/lance-read';
import type { Campaign } from './campaign';
import { TABLE } from './campaign';
import { leftOver } from './ledger-state';
import { readIndependently, type IndependentReading } from './independent-reader';
import { sha256 } from './producer';
import { sleep } from './random';

/**
 * The records of a log with gaps, as a reader read them: a compacted topic (the cleaner
 * removed superseded records), transactions (aborted records and markers are never
 * delivered), a log start moved by retention or deleteRecords. The final check then holds
 * these offsets, not every offset from the log start to its end, to be rows or dead
 * letters, and no row to be at an offset outside them.
 */
export interface ReadableOffsets {
  /** Who read them and when, for the report ("a read_committed kafkajs consumer after the cleaner ran"). */
  readonly reader: string;
  /** partition → every offset the reader read. */
  readonly offsets: ReadonlyMap<number, ReadonlySet<number>>;
}

export function readableCount(r: ReadableOffsets): number {
  let n = 0;
  for (const set of r.offsets.values()) n += set.size;
  return n;
}

/** The campaign's verdict on the final state: `problems` empty when every guarantee held. */
export interface FinalCheck {
  readonly problems: string[];
  /** Markdown lines: the numbers checked, by both readers. */
  readonly lines: string[];
  readonly logRecords: number;
  readonly deadLetters: number;
  readonly rows: number;
  readonly independent: IndependentReading | undefined;
}

interface NodeReading {
  readonly rows: number;
  readonly duplicates: number;
  readonly duplicateExamples: string[];
  readonly mismatches: number;
  readonly mismatchExamples: string[];
  /** Offsets per partition found in the table. */
  readonly offsets: Map<number, Set<number>>;
  readonly foreign: number;
}

async function retrying<T>(read: () => Promise<T>, attempts = 20): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (error) {
      // s3proxy answers a LIST racing a commit with an empty listing now and then.
      if (attempt >= attempts) throw error;
      await sleep(1_000);
    }
  }
}

async function connect(c: Campaign): Promise<lancedb.Connection> {
  return lancedb.connect(c.lanceUri, {
    readConsistencyInterval: 0,
    ...(Object.keys(c.storageOptions).length > 0 ? { storageOptions: { ...c.storageOptions } } : {}),
  });
}

export async function countRows(c: Campaign): Promise<number> {
  return retrying(async () => {
    const db = await connect(c);
    try {
      if (!(await db.tableNames()).includes(TABLE)) return 0;
      const t = await db.openTable(TABLE);
      try {
        return await t.countRows();
      } finally {
        t.close();
      }
    } finally {
      db.close();
    }
  }, 5);
}

/** Every row through LanceDB for Node, streamed: keys, duplicates, and the payload checksum recomputed. */
async function readWithLanceDb(c: Campaign): Promise<NodeReading> {
  return retrying(async () => {
    const db = await connect(c);
    const offsets = new Map<number, Set<number>>();
    let rows = 0;
    let duplicates = 0;
    let mismatches = 0;
    let foreign = 0;
    const duplicateExamples: string[] = [];
    const mismatchExamples: string[] = [];
    try {
      if (!(await db.tableNames()).includes(TABLE))
        return { rows, duplicates, duplicateExamples, mismatches, mismatchExamples, offsets, foreign };
      const t = await db.openTable(TABLE);
      try {
        for await (const batch of t.query().select(['_topic', '_partition', '_offset', 'payload', 'sha'])) {
          const topic = batch.getChild('_topic')!;
          const partition = batch.getChild('_partition')!;
          const offset = batch.getChild('_offset')!;
          const payload = batch.getChild('payload')!;
          const sha = batch.getChild('sha')!;
          for (let i = 0; i < batch.numRows; i++) {
            rows += 1;
            if (topic.get(i) !== c.topic) {
              foreign += 1;
              continue;
            }
            const p = Number(partition.get(i));
            const o = Number(offset.get(i));
            let set = offsets.get(p);
            if (!set) offsets.set(p, (set = new Set()));
            if (set.has(o)) {
              duplicates += 1;
              if (duplicateExamples.length < 10) duplicateExamples.push(`p${p}@${o}`);
            } else set.add(o);
            const text = payload.get(i) as string | null;
            if (text === null || sha256(text) !== sha.get(i)) {
              mismatches += 1;
              if (mismatchExamples.length < 10) mismatchExamples.push(`p${p}@${o}`);
            }
          }
        }
      } finally {
        t.close();
      }
    } finally {
      db.close();
    }
    return { rows, duplicates, duplicateExamples, mismatches, mismatchExamples, offsets, foreign };
  }, 5);
}

/** Distinct source records in the replicas' dead-letter files (a record redelivered after a kill is written again). */
function readDeadLetters(c: Campaign, file: (name: string) => string): Map<number, Set<number>> {
  const out = new Map<number, Set<number>>();
  const name = path.basename(c.definitionFile, '.json');
  for (const s of c.slots) {
    const f = path.join(s.dataDir, 'dead-letter', file(name));
    if (!existsSync(f)) continue;
    for (const line of readFileSync(f, 'utf8').split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        const l = JSON.parse(line) as { topic?: string; partition?: number; offset?: string | number };
        if (l.topic !== c.topic) continue;
        let set = out.get(Number(l.partition));
        if (!set) out.set(Number(l.partition), (set = new Set()));
        set.add(Number(l.offset));
      } catch {
        // a torn last line of a killed writer
      }
    }
  }
  return out;
}

/** Consecutive runs of sorted numbers, as "a–b". */
export function ranges(sorted: readonly number[]): string {
  const out: string[] = [];
  let i = 0;
  while (i < sorted.length) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    out.push(i === j ? `${sorted[i]}` : `${sorted[i]}–${sorted[j]}`);
    i = j + 1;
  }
  return out.join(', ');
}

/** Partitions whose committed offset is not the log end, as "pN committed X / log end Y". */
export async function commitLag(c: Campaign): Promise<string[]> {
  const ends = await c.admin.fetchTopicOffsets(c.topic);
  const [committed] = await c.admin.fetchOffsets({ groupId: c.groupId, topics: [c.topic] });
  const at = new Map(committed!.partitions.map((p) => [p.partition, Number(p.offset)]));
  return ends
    .filter((e) => at.get(e.partition) !== Number(e.high))
    .sort((a, b) => a.partition - b.partition)
    .map((e) => `p${e.partition} committed ${at.get(e.partition)} / log end ${e.high}`);
}

async function logRecords(
  c: Campaign,
): Promise<{ total: number; ends: Map<number, { low: number; high: number }> }> {
  const ends = await c.admin.fetchTopicOffsets(c.topic);
  const map = new Map(ends.map((e) => [e.partition, { low: Number(e.low), high: Number(e.high) }]));
  return { total: [...map.values()].reduce((n, e) => n + e.high - e.low, 0), ends: map };
}

/**
 * Waits for quiescence: committed offsets at the log end and rows + dead letters =
 * records in the log (or the `readable` records of a log with gaps), and every data dir
 * drained; gives up after `timeoutMs` (a stall: reported, then checked as it stands).
 */
export async function settle(
  c: Campaign,
  timeoutMs: number,
  readable?: ReadableOffsets | Incarnations,
): Promise<{ seconds: number; stalled?: string }> {
  const started = Date.now();
  let lastLine = 0;
  for (;;) {
    const lag = await commitLag(c).catch((e: unknown) => [`offsets unreadable: ${String(e)}`]);
    const log = readable
      ? { total: 'byTopicId' in readable ? incarnationCount(readable) : readableCount(readable) }
      : await logRecords(c).catch(() => ({ total: -1 }));
    const dead = [...readDeadLetters(c, (n) => `${n}.jsonl`).values()].reduce((n, s) => n + s.size, 0);
    const rows = await countRows(c).catch(() => -1);
    // Rows can all be in Lance while a publication that landed is not marked yet (its
    // retry is due later): quiescent also means every data dir drained.
    const busy = c.slots.flatMap((sl) => leftOver(sl.dataDir, TABLE).map((w) => `${sl.label}: ${w}`));
    if (lag.length === 0 && rows + dead === log.total && busy.length === 0)
      return { seconds: (Date.now() - started) / 1000 };
    if (Date.now() - lastLine > 5_000) {
      c.log(
        `settling: rows ${rows} + dead letters ${dead} / log ${log.total}; ${lag.length === 0 ? 'offsets committed' : lag.slice(0, 3).join('; ')}${busy.length > 0 ? `; ${busy.join(', ')}` : ''}`,
      );
      lastLine = Date.now();
    }
    if (Date.now() - started > timeoutMs) {
      return {
        seconds: (Date.now() - started) / 1000,
        stalled: `not quiescent after ${timeoutMs / 1000} s: rows ${rows} + dead letters ${dead} / log ${log.total}; ${lag.join('; ') || 'offsets committed'}${busy.length > 0 ? `; still in the data dirs: ${busy.join(', ')}` : ''}`,
      };
    }
    await sleep(2_000);
  }
}

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
  const dead = readDeadLetters(c, (n) => `${n}.jsonl`);
  const setAside = readDeadLetters(c, (n) => `${n}.publications.jsonl`);
  const deadCount = [...dead.values()].reduce((n, s) => n + s.size, 0);
  const setAsideCount = [...setAside.values()].reduce((n, s) => n + s.size, 0);
  const node = await readWithLanceDb(c);
  const produced = c.production;
  const readable = options.readable;
  // The reference: every offset from the log start to its end, or the offsets a reader
  // read from a log with gaps.
  const reference = new Map<number, number[]>();
  for (const [p, e] of [...log.ends].sort((a, b) => a[0] - b[0])) {
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
    if (independent.rows !== expected)
      problems.push(`pylance: ${independent.rows} rows, expected ${expected}`);
    if ((independent.missing ?? 0) > 0)
      problems.push(
        `pylance: ${independent.missing} expected rows absent (${JSON.stringify(independent.missingExamples)})`,
      );
    if ((independent.unexpected ?? 0) > 0)
      problems.push(
        `pylance: ${independent.unexpected} rows at offsets the reader did not read (${JSON.stringify(independent.unexpectedExamples)})`,
      );
    if (independent.duplicates > 0)
      problems.push(
        `pylance: ${independent.duplicates} duplicate triples (${JSON.stringify(independent.duplicateExamples)})`,
      );
    if (independent.checksumMismatches > 0)
      problems.push(
        `pylance: ${independent.checksumMismatches} checksum mismatches (${JSON.stringify(independent.mismatchExamples)})`,
      );
  } catch (error) {
    problems.push(`pylance could not read the table: ${String(error).slice(0, 400)}`);
  }
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

/** Committed offsets = log end, and every replica's data dir clean (both final checks). */
async function commitAndDataDirs(c: Campaign, problems: string[], lines: string[]): Promise<void> {
  const lag = await commitLag(c);
  if (lag.length > 0) problems.push(`committed offsets behind the log end: ${lag.join('; ')}`);
  lines.push(
    lag.length === 0
      ? '- Committed offsets = log end offsets on every partition.'
      : `- Committed offsets behind the log end: ${lag.join('; ')}`,
  );

  for (const s of c.slots) {
    const consumer = loadConsumer(c.definitionFile, process.env, {
      brokers: [...c.o.context.brokers],
      dataDir: s.dataDir,
    });
    const r = await inspect(consumer);
    const left = [
      r.staging.open.count > 0 ? `${r.staging.open.count} open parts` : '',
      r.staging.sealed.count > 0 ? `${r.staging.sealed.count} sealed parts` : '',
      r.staging.quarantined.count > 0 ? `${r.staging.quarantined.count} quarantined parts` : '',
      r.publications.planned > 0 ? `${r.publications.planned} planned publications` : '',
      r.publications.writing > 0 ? `${r.publications.writing} \`writing\` ledger entries` : '',
    ].filter(Boolean);
    if (left.length > 0) problems.push(`${s.label} data dir not clean: ${left.join(', ')}`);
    lines.push(
      `- ${s.label} data dir (${s.runs.length} processes): ${left.length === 0 ? 'no staged parts, no plans, no `writing` entries, nothing quarantined' : left.join(', ')}`,
    );
  }
}

/**
 * The records of a topic deleted and recreated under its name: its offsets start at 0
 * again, so (partition, offset) repeats and only `_topic_id` tells the incarnations
 * apart. The final check then counts per incarnation: rows unique by (_topic,
 * _partition, _offset, _topic_id), and each incarnation's rows exactly its expected set.
 */
export interface Incarnations {
  /** Where the sets come from, for the report. */
  readonly reader: string;
  /** topic id → partition → every offset that must be a row of that incarnation (all JSON: no dead letter expected). */
  readonly byTopicId: ReadonlyMap<string, ReadonlyMap<number, ReadonlySet<number>>>;
}

export function incarnationCount(i: Incarnations): number {
  let n = 0;
  for (const parts of i.byTopicId.values()) for (const set of parts.values()) n += set.size;
  return n;
}

/** "<id>/<partition>" → offsets, as verify_table.py --by-topic-id reads them. */
const groupKey = (id: string, partition: number): string => `${id}/${partition}`;

interface IncarnationReading {
  readonly rows: number;
  readonly duplicates: number;
  readonly duplicateExamples: string[];
  readonly mismatches: number;
  readonly mismatchExamples: string[];
  readonly offsets: Map<string, Set<number>>;
  readonly foreign: number;
}

async function readIncarnations(c: Campaign): Promise<IncarnationReading> {
  return retrying(async () => {
    const db = await connect(c);
    const offsets = new Map<string, Set<number>>();
    let rows = 0;
    let duplicates = 0;
    let mismatches = 0;
    let foreign = 0;
    const duplicateExamples: string[] = [];
    const mismatchExamples: string[] = [];
    try {
      if (!(await db.tableNames()).includes(TABLE))
        return { rows, duplicates, duplicateExamples, mismatches, mismatchExamples, offsets, foreign };
      const t = await db.openTable(TABLE);
      try {
        const columns = ['_topic', '_topic_id', '_partition', '_offset', 'payload', 'sha'];
        for await (const batch of t.query().select(columns)) {
          const topic = batch.getChild('_topic')!;
          const id = batch.getChild('_topic_id')!;
          const partition = batch.getChild('_partition')!;
          const offset = batch.getChild('_offset')!;
          const payload = batch.getChild('payload')!;
          const sha = batch.getChild('sha')!;
          for (let i = 0; i < batch.numRows; i++) {
            rows += 1;
            if (topic.get(i) !== c.topic) {
              foreign += 1;
              continue;
            }
            const key = groupKey(String(id.get(i)), Number(partition.get(i)));
            const o = Number(offset.get(i));
            let set = offsets.get(key);
            if (!set) offsets.set(key, (set = new Set()));
            if (set.has(o)) {
              duplicates += 1;
              if (duplicateExamples.length < 10) duplicateExamples.push(`${key}@${o}`);
            } else set.add(o);
            const text = payload.get(i) as string | null;
            if (text === null || sha256(text) !== sha.get(i)) {
              mismatches += 1;
              if (mismatchExamples.length < 10) mismatchExamples.push(`${key}@${o}`);
            }
          }
        }
      } finally {
        t.close();
      }
    } finally {
      db.close();
    }
    return { rows, duplicates, duplicateExamples, mismatches, mismatchExamples, offsets, foreign };
  }, 5);
}

/**
 * The final check of a recreated topic: every expected (incarnation, partition, offset)
 * is a row, no row is anywhere else (another incarnation, an offset not expected), rows
 * unique by the 4-tuple and checksummed, the same read by pylance (`--by-topic-id
 * --expected`), no dead letter (the step produces JSON only); then committed = log end
 * of the current incarnation and clean data dirs, as for every step.
 */
async function incarnationCheck(
  c: Campaign,
  incarnations: Incarnations,
  stalled: string | undefined,
): Promise<FinalCheck> {
  const problems: string[] = stalled ? [`stall: ${stalled}`] : [];
  const lines: string[] = [];
  const log = await logRecords(c);
  const dead = readDeadLetters(c, (n) => `${n}.jsonl`);
  const setAside = readDeadLetters(c, (n) => `${n}.publications.jsonl`);
  const deadCount = [...dead.values()].reduce((n, s) => n + s.size, 0);
  const setAsideCount = [...setAside.values()].reduce((n, s) => n + s.size, 0);
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
    if (independent.rows !== expected)
      problems.push(`pylance: ${independent.rows} rows, expected ${expected}`);
    if ((independent.missing ?? 0) > 0)
      problems.push(
        `pylance: ${independent.missing} expected rows absent (${JSON.stringify(independent.missingExamples)})`,
      );
    if ((independent.unexpected ?? 0) > 0)
      problems.push(
        `pylance: ${independent.unexpected} rows not expected in their incarnation (${JSON.stringify(independent.unexpectedExamples)})`,
      );
    if (independent.duplicates > 0)
      problems.push(
        `pylance: ${independent.duplicates} duplicate 4-tuples (${JSON.stringify(independent.duplicateExamples)})`,
      );
    if (independent.checksumMismatches > 0)
      problems.push(
        `pylance: ${independent.checksumMismatches} checksum mismatches (${JSON.stringify(independent.mismatchExamples)})`,
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
