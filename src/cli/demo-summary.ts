import type * as lancedb from '@lancedb/lancedb';
import type { ResolvedConsumer } from '../config';
import { OFFSET_COLUMN, PARTITION_COLUMN, TOPIC_COLUMN } from '../staging/system-columns';
import { DemoMismatchError, TableMissingError } from './errors';
import { datasetPathOf, lanceUriOf, openExistingTable, quote } from './lance-read';

export const TOPIC = 'app-logs';
export const DLQ = `${TOPIC}.dlq`;

/** The offsets this run produced, per partition: [from, to). */
export type RunRanges = ReadonlyMap<number, { readonly from: number; readonly to: number }>;

function rangesFilter(ranges: RunRanges, topic: string = TOPIC): string {
  const parts = [...ranges]
    .filter(([, r]) => r.to > r.from)
    .map(
      ([p, r]) =>
        `(${PARTITION_COLUMN} = ${p} AND ${OFFSET_COLUMN} >= ${r.from} AND ${OFFSET_COLUMN} < ${r.to})`,
    );
  return `${TOPIC_COLUMN} = ${quote(topic)} AND (${parts.length > 0 ? parts.join(' OR ') : 'false'})`;
}

export async function publishedInRanges(
  consumer: ResolvedConsumer,
  ranges: RunRanges,
  topic: string = TOPIC,
): Promise<number> {
  const opened = await openExistingTable(consumer).catch(() => undefined);
  if (!opened) return 0;
  try {
    return await opened.table.countRows(rangesFilter(ranges, topic));
  } finally {
    opened.close();
  }
}

export interface SummaryInput {
  readonly consumer: ResolvedConsumer;
  /** The demo's topic and dead-letter topic (default: the JSON log demo's). */
  readonly topic?: string;
  readonly dlq?: string;
  /** A variant's own lines after the shared ones, and the problems that fail the run. */
  readonly report?: () => Promise<{ lines: string[]; problems: string[] }>;
  readonly produced: number;
  readonly broken: number;
  readonly dead: number;
  readonly ranges: RunRanges;
  readonly seconds: number;
  readonly logFile: string;
  readonly replicaExit: number | null;
}

export interface RunScan {
  readonly rows: number;
  readonly duplicates: number;
  readonly levels: ReadonlyMap<string, number>;
  readonly lastErrors: readonly ErrorRow[];
}

export interface ErrorRow {
  readonly ts: number;
  readonly partition: number;
  readonly offset: number;
  readonly service: string;
  readonly message: string;
  readonly status: number | null;
}

/** Reads this run's rows back through LanceDB and checks that the numbers add up. */
export async function summarize(print: (line: string) => void, s: SummaryInput): Promise<void> {
  // A run that published nothing has no table: that is a mismatch to report, not a crash.
  const opened = await openExistingTable(s.consumer).catch((error: unknown) => {
    if (error instanceof TableMissingError) return undefined;
    throw error;
  });
  const topic = s.topic ?? TOPIC;
  const dlq = s.dlq ?? DLQ;
  let scan: RunScan = { rows: 0, duplicates: 0, levels: new Map(), lastErrors: [] };
  let total = 0;
  if (opened) {
    try {
      scan = await scanRun(opened.table, s.ranges, topic);
      total = await opened.table.countRows();
    } finally {
      opened.close();
    }
  }
  const tablePath = datasetPathOf(lanceUriOf(s.consumer), s.consumer.table);
  const expected = s.produced - s.dead;
  print(`Demo finished in ${s.seconds.toFixed(0)} s.`);
  print(`Produced      ${s.produced} log lines to ${topic} (${s.broken} broken on purpose)`);
  print(`Dead letters  ${s.dead} records in ${dlq}, with their reason in the headers`);
  print(
    `Published     ${scan.rows} rows of this run into the Lance table ${s.consumer.table} (${total} in the table in all)`,
  );
  print(
    `Check         ${scan.rows} published = ${s.produced} produced - ${s.dead} dead letters: ${scan.rows === expected ? 'yes' : 'NO'}`,
  );
  print(`Duplicates    ${scan.duplicates} rows share a (_topic, _partition, _offset)`);
  print(
    `By level      ${[...scan.levels]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([l, c]) => `${l} ${c}`)
      .join('  ')}`,
  );
  print('Last errors');
  for (const e of scan.lastErrors)
    print(
      `  ${new Date(e.ts).toISOString()}  ${topic}[${e.partition}]@${e.offset}  ${e.service}  ${e.status ?? ''} ${e.message}`,
    );
  const variant = s.report && opened ? await s.report() : { lines: [], problems: [] };
  for (const line of variant.lines) print(line);
  print(`Table         ${tablePath}`);
  print(`Python        python3 -c "import lance; print(lance.dataset('${tablePath}').count_rows())"`);
  print(`Logs          ${s.logFile}`);
  const problems: string[] = [];
  if (scan.rows !== expected)
    problems.push(
      `${scan.rows} rows published, expected ${s.produced} produced - ${s.dead} dead letters = ${expected}`,
    );
  if (s.dead !== s.broken)
    problems.push(`${s.dead} dead letters, but ${s.broken} lines were broken on purpose`);
  if (scan.duplicates > 0) problems.push(`${scan.duplicates} duplicate (_topic, _partition, _offset) rows`);
  problems.push(...variant.problems);
  if (s.replicaExit !== 0) problems.push(`the replica exited with code ${String(s.replicaExit)} on SIGTERM`);
  if (problems.length > 0) throw new DemoMismatchError(problems);
}

/**
 * One pass over this run's rows: count by level, duplicates (a bitmap per partition,
 * so memory is one byte per produced record), and the five newest errors.
 */
export async function scanRun(
  table: lancedb.Table,
  ranges: RunRanges,
  topic: string = TOPIC,
): Promise<RunScan> {
  const seen = new Map([...ranges].map(([p, r]) => [p, new Uint8Array(Math.max(0, r.to - r.from))]));
  const levels = new Map<string, number>();
  let rows = 0;
  let duplicates = 0;
  let lastErrors: ErrorRow[] = [];
  const query = table
    .query()
    .where(rangesFilter(ranges, topic))
    .select(['level', 'ts', 'service', 'message', 'status', PARTITION_COLUMN, OFFSET_COLUMN]);
  for await (const batch of query) {
    const col = (name: string) => batch.getChild(name);
    const [level, ts, service, message, status, partition, offset] = [
      col('level'),
      col('ts'),
      col('service'),
      col('message'),
      col('status'),
      col(PARTITION_COLUMN),
      col(OFFSET_COLUMN),
    ];
    for (let i = 0; i < batch.numRows; i++) {
      rows++;
      const p = Number(partition?.get(i));
      const off = Number(offset?.get(i));
      const bits = seen.get(p);
      const index = off - (ranges.get(p)?.from ?? 0);
      if (bits && index >= 0 && index < bits.length) {
        if (bits[index]) duplicates++;
        bits[index] = 1;
      }
      const l = String(level?.get(i));
      levels.set(l, (levels.get(l) ?? 0) + 1);
      if (l === 'error') {
        lastErrors.push({
          ts: toMs(ts?.get(i)),
          partition: p,
          offset: off,
          service: String(service?.get(i)),
          message: String(message?.get(i)),
          status: status?.get(i) == null ? null : Number(status.get(i)),
        });
        if (lastErrors.length > 50) lastErrors = newest(lastErrors);
      }
    }
  }
  return { rows, duplicates, levels, lastErrors: newest(lastErrors) };
}

/** Newest five by timestamp, then offset. */
function newest(rows: ErrorRow[]): ErrorRow[] {
  return rows.sort((a, b) => b.ts - a.ts || b.offset - a.offset).slice(0, 5);
}

function toMs(value: unknown): number {
  if (value instanceof Date) return value.getTime();
  if (typeof value === 'bigint') return Number(value);
  return Number(value);
}
