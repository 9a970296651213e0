import * as path from 'node:path';
import type { RecordBatch } from 'apache-arrow';
import { mkdirDurably, pathExists, renameDurably, writeFileAtomically } from '../common/fs-durable';
import { FileDeadLetterSink, type DeadLetter } from '../dead-letters/dead-letter';
import { QUARANTINE_DIR } from '../staging/quarantine';
import { readSealedPart } from '../staging/sealed-part';
import {
  OFFSET_COLUMN,
  PARTITION_COLUMN,
  TIMESTAMP_COLUMN,
  TOPIC_COLUMN,
  TOPIC_ID_COLUMN,
} from '../staging/system-columns';
import { crashPoint } from '../faults/crash-points';
import { keptRuns } from './keep-range';
import { ledger, type Plan, type PlanPart, type QuarantineRecord } from './ledger';

export interface QuarantineOptions {
  readonly tableDir: string;
  readonly plan: Plan;
  readonly record: QuarantineRecord;
  /** JSON lines, the format of the file dead-letter output; undefined: parts only. */
  readonly deadLetterFile: string | undefined;
  /** Write the kept rows as dead letters (they are readable: the failure was the table's schema). */
  readonly deadLetterRows: boolean;
}

export interface QuarantineOutcome {
  /** Parts moved by this call (a resumed quarantine may find some already moved). */
  readonly moved: readonly string[];
  /** Dead letters written, per topic. */
  readonly deadLetters: ReadonlyMap<string, number>;
}

/**
 * Sets a permanently failed plan aside so that it never holds the table's other
 * publications back, and nothing of it is lost: (1) `quarantined` in the ledger
 * (from then on it is never published), (2) its kept rows to the dead-letter file,
 * (3) each part with a `.reason.json` into the staging quarantine (kept for a human,
 * never deleted by kafka-lance), (4) the ledger forgets it. A kill at any step is
 * finished from (1) by the next run; the dead letters are written again only if no
 * part had been moved yet (at least once, like Connect's dead-letter queue).
 */
export async function quarantinePlan(o: QuarantineOptions): Promise<QuarantineOutcome> {
  const { tableDir, plan, record } = o;
  await ledger.markQuarantined(tableDir, record);
  crashPoint('after-quarantine-marked');
  const present: PlanPart[] = [];
  for (const part of plan.parts) if (await pathExists(part.path)) present.push(part);
  const deadLetters = new Map<string, number>();
  const dir = path.join(tableDir, QUARANTINE_DIR);
  const file = o.deadLetterFile;
  if (o.deadLetterRows && file && present.length === plan.parts.length) {
    await oneWriterAt(file, async () => {
      const sink = new FileDeadLetterSink(file);
      try {
        for (const part of present) {
          const { batches } = await readSealedPart(part.path);
          const detail = `${record.message} (publication ${plan.id}; part kept as ${path.join(dir, path.basename(part.path))})`;
          // A batch at a time: a part's rows as JSON are several times its Arrow bytes.
          for (const batch of batches) {
            const letters = deadLettersOf(batch, part, detail);
            await sink.write(letters);
            for (const l of letters) deadLetters.set(l.topic, (deadLetters.get(l.topic) ?? 0) + 1);
          }
        }
      } finally {
        await sink.close();
      }
    });
    crashPoint('after-dead-letters-written');
  }
  const moved: string[] = [];
  if (present.length > 0) await mkdirDurably(dir);
  for (const part of present) {
    const target = path.join(dir, path.basename(part.path));
    await writeFileAtomically(
      `${target}.reason.json`,
      JSON.stringify(
        {
          ...record,
          planId: plan.id,
          table: plan.table,
          part: part.path,
          rows: part.rows,
          keptRows: part.keptRows,
          keep: part.keep,
          deadLetterFile: o.deadLetterRows ? o.deadLetterFile : undefined,
        },
        null,
        2,
      ),
    );
    await renameDurably(part.path, target);
    moved.push(target);
    crashPoint('after-first-part-quarantined');
  }
  await ledger.forget(tableDir, plan.id);
  return { moved, deadLetters };
}

/**
 * The dead-letter files being written in this thread, each with the end of its last
 * writer. The tables of a worker share one file (`<name>.publications.jsonl`), and a
 * line appended through one handle can interleave with another handle's (appends are
 * written in chunks): one plan's letters are written at a time per file.
 */
const writers = new Map<string, Promise<void>>();

async function oneWriterAt(file: string, write: () => Promise<void>): Promise<void> {
  const before = writers.get(file) ?? Promise.resolve();
  const mine = before.then(write, write);
  const tail = mine.then(
    () => undefined,
    () => undefined,
  );
  writers.set(file, tail);
  try {
    await mine;
  } finally {
    if (writers.get(file) === tail) writers.delete(file);
  }
}

/** The plan's rows of one staged batch as dead letters: the row's own columns as the JSON value. */
function deadLettersOf(batch: RecordBatch, part: PlanPart, detail: string): DeadLetter[] {
  const out: DeadLetter[] = [];
  const system = new Set([TOPIC_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN, TIMESTAMP_COLUMN, TOPIC_ID_COLUMN]);
  const columns = batch.schema.fields.map((f) => f.name).filter((n) => !system.has(n));
  const topics = batch.getChild(TOPIC_COLUMN)!;
  const partitions = batch.getChild(PARTITION_COLUMN)!;
  const offsets = batch.getChild(OFFSET_COLUMN)!;
  const timestamps = batch.getChild(TIMESTAMP_COLUMN);
  for (const [start, end] of keptRuns(batch, part.keep)) {
    for (let i = start; i < end; i++) {
      const row: Record<string, unknown> = {};
      for (const name of columns) row[name] = batch.getChild(name)!.get(i) as unknown;
      out.push({
        topic: topics.get(i) as string,
        partition: partitions.get(i) as number,
        offset: Number(offsets.get(i) as bigint),
        timestamp: String(Number((timestamps?.get(i) as number | bigint | null) ?? 0)),
        reason: 'schema-mismatch',
        detail,
        key: null,
        value: Buffer.from(JSON.stringify(row, jsonSafe), 'utf8'),
        headers: undefined,
      });
    }
  }
  return out;
}

/** Arrow values JSON cannot hold as they are: 64-bit integers and bytes. */
function jsonSafe(_key: string, value: unknown): unknown {
  if (typeof value === 'bigint')
    return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  return value;
}
