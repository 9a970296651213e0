import { promises as fsp } from 'node:fs';
import { RecordBatch, Schema } from 'apache-arrow';
import { KafkaLanceError, PartCorruptError } from '../common/errors';
import { decodeBatches } from '../staging/ipc-stream';
import { matchesPartChecksum } from '../staging/part-digest';
import { stagedColumns } from '../staging/system-columns';
import { crashPoint } from '../faults/crash-points';
import { keptRuns } from './keep-range';
import type { Permits } from './permits';
import type { KeepRange, OffsetInterval, PlanPart } from './ledger';

/** A source part of a plan is gone, but its plan was never published. */
export class SourceMissingError extends KafkaLanceError {
  constructor(readonly path: string) {
    super('PUBLICATION_SOURCE_MISSING', `staging part ${path} of an unpublished plan is missing`, {
      context: { path },
    });
  }
}

/** What one preparation task reports: the publication commits only with all of them, matching the plan. */
export interface Descriptor {
  readonly path: string;
  readonly rows: number;
  readonly bytes: number;
  readonly checksum: string;
  readonly intervals: readonly OffsetInterval[];
}

export interface PreparedPart {
  readonly descriptor: Descriptor;
  readonly batches: readonly RecordBatch[];
  /** The part's schema (without its metadata, as the batches have it). */
  readonly schema: Schema;
  /** Whether the part's bytes are the slot they were asked into (not a buffer of their own). */
  readonly inSlot: boolean;
}

export interface PreparationContext {
  readonly fetch: Permits;
  readonly decode: Permits;
  /** Test hooks: run inside the fetch / decode permit (inject blocking work or failures). */
  readonly hooks?: {
    readonly fetched?: (part: PlanPart) => Promise<void> | void;
    readonly decoded?: (part: PlanPart) => Promise<void> | void;
  };
  readonly signal?: AbortSignal;
}

/**
 * Fetches and decodes one whole part under the shared permits, keeping the rows the
 * plan keeps. The source reservation is the publication's (Publisher.publish), taken
 * before any of its parts is fetched. A task that has started is never abandoned
 * midway: cancellation is checked only before it starts.
 */
export async function preparePart(
  part: PlanPart,
  ctx: PreparationContext,
  slot?: Buffer,
): Promise<PreparedPart> {
  ctx.signal?.throwIfAborted();
  const bytes = await ctx.fetch.run(async () => {
    const read = await readPart(part.path, slot).catch((error: NodeJS.ErrnoException) => {
      throw error.code === 'ENOENT' ? new SourceMissingError(part.path) : error;
    });
    crashPoint('during-prepare');
    await ctx.hooks?.fetched?.(part);
    return read;
  });
  // The one check of these bytes in this process (the writer handed its checksum over).
  if (!matchesPartChecksum(bytes, part.checksum))
    throw new PartCorruptError(part.path, 'checksum differs from the plan');
  const checksum = part.checksum;
  const { batches, schema } = await ctx.decode.run(async () => {
    // Every row kept (the usual case: no ownership change cut the part): no per-row test.
    const keep = part.keptRows === part.rows ? 'all' : part.keep;
    const decoded = decodeBatches(bytes);
    // The part's schema without its metadata (epoch, owner): what the table is given.
    const plain = new Schema(decoded.schema.fields);
    const kept = keepRows(decoded.batches, plain, keep);
    await ctx.hooks?.decoded?.(part);
    return { batches: kept, schema: plain };
  });
  const rows = batches.reduce((n, b) => n + b.numRows, 0);
  return {
    descriptor: { path: part.path, rows, bytes: part.bytes, checksum, intervals: intervalsOf(batches) },
    batches,
    schema,
    inSlot: slot !== undefined && bytes.buffer === slot.buffer && bytes.byteOffset === slot.byteOffset,
  };
}

/**
 * The part's bytes: read into `slot` when the file is the slot's size (the plan's), else
 * into a buffer of their own (a file of another size fails its checksum there).
 */
async function readPart(file: string, slot: Buffer | undefined): Promise<Buffer> {
  if (!slot) return fsp.readFile(file);
  const handle = await fsp.open(file, 'r');
  try {
    const { size } = await handle.stat();
    if (size !== slot.byteLength) return await handle.readFile();
    for (let at = 0; at < size;) {
      const { bytesRead } = await handle.read(slot, at, size - at, at);
      if (bytesRead === 0) return await fsp.readFile(file); // it shrank while read
      at += bytesRead;
    }
    return slot;
  } finally {
    await handle.close();
  }
}

/** The rows inside the keep ranges, as slices (no copy), under `schema` (the part's, without its metadata). */
function keepRows(
  batches: readonly RecordBatch[],
  schema: Schema,
  keep: readonly KeepRange[] | 'all',
): RecordBatch[] {
  const out: RecordBatch[] = [];
  for (const batch of batches) {
    const plain = new RecordBatch(schema, batch.data);
    if (keep === 'all') {
      out.push(plain);
      continue;
    }
    for (const [start, end] of keptRuns(batch, keep)) {
      out.push(start === 0 && end === batch.numRows ? plain : plain.slice(start, end));
    }
  }
  return out;
}

/**
 * Runs of consecutive offsets per partition and topic incarnation (equal offsets: rows
 * of one record). The incarnation is part of the run's identity: rows of a recreated
 * topic reuse the offsets of the deleted one's, and only their own may count.
 */
export function intervalsOf(batches: readonly RecordBatch[]): OffsetInterval[] {
  // Runs are built as rows come (offsets mostly ascend within a partition), then sorted
  // and merged: each run holds every offset from its first to its last, so merging the
  // overlapping or adjacent ones gives the maximal runs of the set of offsets.
  type Entry = {
    topic: string;
    partition: number;
    topicId: string | undefined;
    runs: { first: number; last: number }[];
  };
  const byPartition = new Map<string, Entry>();
  for (const b of batches) {
    const reader = stagedColumns(b);
    // A staged batch holds one partition's rows: the previous row's entry is the usual hit.
    let entry: Entry | undefined;
    let run: { first: number; last: number } | undefined;
    for (let i = 0; i < b.numRows; i++) {
      const topic = reader.topic(i);
      const partition = reader.partition(i);
      const topicId = reader.topicId(i);
      if (
        entry === undefined ||
        entry.partition !== partition ||
        entry.topic !== topic ||
        entry.topicId !== topicId
      ) {
        const key = `${topic}\u0000${partition}\u0000${topicId ?? ''}`;
        entry = byPartition.get(key);
        if (!entry) byPartition.set(key, (entry = { topic, partition, topicId, runs: [] }));
        run = entry.runs.at(-1);
      }
      const offset = reader.offset(i);
      if (run !== undefined && offset >= run.last && offset <= run.last + 1) run.last = offset;
      else entry.runs.push((run = { first: offset, last: offset }));
    }
  }
  const out: OffsetInterval[] = [];
  for (const { topic, partition, topicId, runs } of byPartition.values()) {
    const id = topicId === undefined ? {} : { topicId };
    runs.sort((a, b) => a.first - b.first);
    let current: { first: number; last: number } | undefined;
    for (const r of runs) {
      if (current !== undefined && r.first <= current.last + 1) {
        current.last = Math.max(current.last, r.last);
        continue;
      }
      if (current) out.push({ topic, partition, ...current, ...id });
      current = { ...r };
    }
    if (current) out.push({ topic, partition, ...current, ...id });
  }
  return out;
}
