import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { RecordBatch, Schema } from 'apache-arrow';
import { KafkaLanceError, PartCorruptError } from '../common/errors';
import { decodeBatches } from '../staging/ipc-stream';
import { stagedColumns } from '../staging/system-columns';
import { crashPoint } from './crash-points';
import { keptRuns } from './keep-range';
import type { Permits } from './permits';
import type { KeepRange, OffsetInterval, PlanPart } from './plan';

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
export async function preparePart(part: PlanPart, ctx: PreparationContext): Promise<PreparedPart> {
  ctx.signal?.throwIfAborted();
  const bytes = await ctx.fetch.run(async () => {
    const read = await fsp.readFile(part.path).catch((error: NodeJS.ErrnoException) => {
      throw error.code === 'ENOENT' ? new SourceMissingError(part.path) : error;
    });
    crashPoint('during-prepare');
    await ctx.hooks?.fetched?.(part);
    return read;
  });
  const checksum = createHash('sha256').update(bytes).digest('hex');
  if (checksum !== part.checksum) throw new PartCorruptError(part.path, 'checksum differs from the plan');
  const batches = await ctx.decode.run(async () => {
    // Every row kept (the usual case: no ownership change cut the part): no per-row test.
    const keep = part.keptRows === part.rows ? 'all' : part.keep;
    const kept = keepRows(decodeBatches(bytes).batches, keep);
    await ctx.hooks?.decoded?.(part);
    return kept;
  });
  const rows = batches.reduce((n, b) => n + b.numRows, 0);
  return {
    descriptor: { path: part.path, rows, bytes: part.bytes, checksum, intervals: intervalsOf(batches) },
    batches,
  };
}

/** The rows inside the keep ranges, as slices (no copy), with the part's schema metadata dropped. */
function keepRows(batches: readonly RecordBatch[], keep: readonly KeepRange[] | 'all'): RecordBatch[] {
  const out: RecordBatch[] = [];
  for (const batch of batches) {
    const plain = new RecordBatch(new Schema(batch.schema.fields), batch.data);
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

/** Runs of consecutive offsets per partition (equal offsets: rows of one record). */
export function intervalsOf(batches: readonly RecordBatch[]): OffsetInterval[] {
  const byPartition = new Map<string, { topic: string; partition: number; offsets: number[] }>();
  for (const b of batches) {
    const reader = stagedColumns(b);
    for (let i = 0; i < b.numRows; i++) {
      const topic = reader.topic(i);
      const partition = reader.partition(i);
      const key = `${topic}\u0000${partition}`;
      let entry = byPartition.get(key);
      if (!entry) byPartition.set(key, (entry = { topic, partition, offsets: [] }));
      entry.offsets.push(reader.offset(i));
    }
  }
  const out: OffsetInterval[] = [];
  for (const { topic, partition, offsets } of byPartition.values()) {
    offsets.sort((a, b) => a - b);
    let first = offsets[0]!;
    let last = first;
    for (const o of offsets.slice(1)) {
      if (o <= last + 1) {
        last = o;
        continue;
      }
      out.push({ topic, partition, first, last });
      first = last = o;
    }
    if (offsets.length > 0) out.push({ topic, partition, first, last });
  }
  return out;
}
