import { KafkaLanceError } from '../common/errors';
import type { Logger } from '../common/logger';
import type { StagingEpoch } from '../staging/epoch';
import { BoundedBudget } from '../common/bounded-budget';
import type { SealedPart } from '../staging/sealed-part';
import { InThreadLane } from './in-thread-lane';
import { PACKED_META_BYTES, packMessages, packedBytes, type PackableMessage } from './packed-messages';
import type { StagingLane } from './staging-lane';
import { WorkerLane } from './worker-lane';
import { FetchedRecord, offsetNumberOf, timestampNumberOf } from '../common/fetched-record';
import type { RawMessage } from '../decode/raw-message';
import type { KnownField } from '../decode/record-decoder';
import type { WriterSchema } from '../schema-registry/wire-format';
import type {
  BatchDone,
  BatchRecords,
  DurableReport,
  PartitionOffset,
  SealedSummary,
  StagingWorkerInit,
  WorkerReply,
} from './protocol';

export interface StagingPoolOptions {
  /** Staging worker threads; 0 stages on the main thread (one lane, no thread). */
  readonly workers: number;
  readonly consumerPath: string;
  /** `schema: 'infer'`: the table's existing column types (see readKnownFields). */
  readonly knownFields?: readonly KnownField[];
  /** A registry `keyFormat`: the table's `_key` type (see tableKeyType), when it has one. */
  readonly tableKeyType?: string;
  readonly brokers: readonly string[];
  readonly tableDir: string;
  /** The replica's data directory (a routing consumer's tables are staged under it). */
  readonly dataDir?: string;
  readonly epoch: StagingEpoch;
  readonly maxPartBytes: number;
  readonly maxPartAgeMs: number;
  /** Part files open at once over all lanes (file descriptors); each lane gets an equal share. */
  readonly maxOpenParts: number;
  /** Bound on records and bytes handed to the lanes and not yet staged. */
  readonly maxQueueRecords: number;
  readonly maxQueueBytes: number;
  readonly logger: Logger;
  /**
   * Called synchronously when a lane reports a staged batch, before any later reply
   * (a sync covering it) is handled: dead letters are registered in time to hold back
   * their offsets' commit.
   */
  readonly onBatchDone: (topic: string, partition: number, result: BatchDone) => void;
  /** Called once when a lane reports a failure that staging cannot survive (restart to recover). */
  readonly onFatal: (error: Error) => void;
  /** Parts sealed by a flush, an epoch change or a close, as their writers describe them. */
  readonly onSealed?: (parts: readonly SealedPart[]) => void;
}

/**
 * The pool is closing or closed: the batch was not handed to a lane, so none of its
 * records is staged. Not a failure: its offsets stay uncommitted and Kafka redelivers
 * the batch to whoever consumes the partition next.
 */
export class StagingPoolClosedError extends KafkaLanceError {
  constructor(topic: string, partition: number, records: number) {
    super(
      'STAGING_CLOSED',
      `staging is closing: a batch of ${records} records of ${topic}[${partition}] was refused`,
      {
        retriable: true,
        context: { topic, partition, records },
      },
    );
  }
}

/**
 * The staging lanes (worker threads, or the main thread) and the bounded queue in front
 * of them. Each (topic, partition) always goes to the same lane, so a partition's
 * batches are staged in order. `admit` resolves once the batch is queued, and its
 * `done` once it is pushed into staging (not yet durable: `sync` says what is).
 */
export class StagingPool {
  readonly #lanes: StagingLane[];
  readonly #budget: BoundedBudget;
  readonly #onBatchDone: StagingPoolOptions['onBatchDone'];
  readonly #onSealed: StagingPoolOptions['onSealed'];
  #parts = { open: 0, sealing: 0 };
  /** Set by close() before its first await: no batch is sent to a lane after the close request. */
  #closing = false;

  private constructor(
    lanes: StagingLane[],
    budget: BoundedBudget,
    onBatchDone: StagingPoolOptions['onBatchDone'],
    onSealed: StagingPoolOptions['onSealed'],
  ) {
    this.#lanes = lanes;
    this.#budget = budget;
    this.#onBatchDone = onBatchDone;
    this.#onSealed = onSealed;
  }

  static async start(options: StagingPoolOptions): Promise<StagingPool> {
    const lanes = Math.max(1, options.workers);
    const handles = await Promise.all(
      Array.from({ length: lanes }, async (_, index) => {
        const init: StagingWorkerInit = {
          consumerPath: options.consumerPath,
          knownFields: options.knownFields ?? [],
          ...(options.tableKeyType === undefined ? {} : { tableKeyType: options.tableKeyType }),
          brokers: options.brokers,
          tableDir: options.tableDir,
          ...(options.dataDir === undefined ? {} : { dataDir: options.dataDir }),
          workerIndex: index,
          epoch: options.epoch,
          maxPartBytes: options.maxPartBytes,
          maxPartAgeMs: options.maxPartAgeMs,
          maxOpenParts: Math.max(1, Math.floor(options.maxOpenParts / lanes)),
          logLevel: options.logger.level,
        };
        return options.workers === 0
          ? InThreadLane.start(init, options.onFatal)
          : WorkerLane.start(init, options.onFatal);
      }),
    );
    return new StagingPool(
      handles,
      new BoundedBudget(options.maxQueueRecords, options.maxQueueBytes),
      options.onBatchDone,
      options.onSealed,
    );
  }

  /** The lane that owns a partition: a stable hash, so a partition's order is kept. */
  laneOf(topic: string, partition: number): number {
    let h = 2166136261;
    for (let i = 0; i < topic.length; i++) h = Math.imul(h ^ topic.charCodeAt(i), 16777619);
    h = Math.imul(h ^ partition, 16777619);
    return (h >>> 0) % this.#lanes.length;
  }

  /**
   * Waits for room in the queue (backpressure), then hands the batch to its lane.
   * `through` is the last offset the batch accounts for (at least its last record's;
   * see WorkerRequest): a batch of no records moves the partition past a gap.
   * Resolves once admitted; `done` resolves once the batch is pushed into staging.
   * Rejects with StagingPoolClosedError, having staged nothing, once close() has begun.
   */
  async admit(
    topic: string,
    partition: number,
    messages: readonly PackableMessage[],
    epoch: number,
    through: number,
    schemas: readonly WriterSchema[] = [],
  ): Promise<{ done: Promise<BatchDone> }> {
    if (this.#closing) throw new StagingPoolClosedError(topic, partition, messages.length);
    const lane = this.#lanes[this.laneOf(topic, partition)]!;
    const { records, bytes, transfer } = batchRecords(messages, lane.packsBatches);
    await this.#budget.acquire(messages.length, bytes);
    // close() may have started while this batch waited for room: a lane handles its
    // requests in order, so a batch sent after the close request would meet a closed staging.
    if (this.#closing) {
      this.#budget.release(messages.length, bytes);
      throw new StagingPoolClosedError(topic, partition, messages.length);
    }
    const done = lane
      .request<Extract<WorkerReply, { type: 'batch' }>>(
        (id) => ({ type: 'batch', id, topic, partition, records, through, epoch, schemas }),
        transfer,
        (reply) => this.#onBatchDone(topic, partition, reply.result),
      )
      .then((r) => r.result)
      .finally(() => this.#budget.release(messages.length, bytes));
    return { done };
  }

  queue(): { records: number; bytes: number; maxRecords: number; maxBytes: number; waiting: number } {
    const b = this.#budget;
    return {
      records: b.records,
      bytes: b.bytes,
      maxRecords: b.maxRecords,
      maxBytes: b.maxBytes,
      waiting: b.waiting,
    };
  }

  /** One durability tick in every lane; the durable offsets of all partitions. */
  async sync(): Promise<DurableReport[]> {
    const replies = await Promise.all(
      this.#lanes.map((w) =>
        w.request<Extract<WorkerReply, { type: 'sync' }>>((id) => ({ type: 'sync', id })),
      ),
    );
    this.#parts = replies.reduce(
      (a, r) => ({ open: a.open + r.parts.open, sealing: a.sealing + r.parts.sealing }),
      { open: 0, sealing: 0 },
    );
    return replies.map((r) => ({ epoch: r.epoch, offsets: r.durable, unsealed: r.unsealed }));
  }

  /** Open and sealing parts over all lanes, as of the last sync. */
  get parts(): { open: number; sealing: number } {
    return this.#parts;
  }

  #announce(replies: readonly { sealed: SealedSummary }[]): SealedSummary {
    const summary = sumSealed(replies);
    if (summary.sealed.length > 0) this.#onSealed?.(summary.sealed);
    return summary;
  }

  async flush(force = false): Promise<SealedSummary> {
    return this.#announce(
      await Promise.all(
        this.#lanes.map((w) =>
          w.request<Extract<WorkerReply, { type: 'flush' }>>((id) => ({ type: 'flush', id, force })),
        ),
      ),
    );
  }

  async beginEpoch(
    epoch: StagingEpoch,
    revoked: readonly PartitionOffset[],
    assigned: readonly PartitionOffset[],
  ): Promise<SealedSummary> {
    return this.#announce(
      await Promise.all(
        this.#lanes.map((w) =>
          w.request<Extract<WorkerReply, { type: 'epoch' }>>((id) => ({
            type: 'epoch',
            id,
            epoch,
            revoked,
            assigned,
          })),
        ),
      ),
    );
  }

  /** Seals everything and stops the lanes (never ends a thread mid-write). */
  async close(): Promise<SealedSummary> {
    this.#closing = true;
    const replies = await Promise.all(
      this.#lanes.map((w) =>
        w.request<Extract<WorkerReply, { type: 'close' }>>((id) => ({ type: 'close', id })),
      ),
    );
    await Promise.all(this.#lanes.map((lane) => lane.stopped()));
    return this.#announce(replies);
  }
}

/** A batch as its lane takes it, and the bytes it holds against the queue's budget. */
function batchRecords(
  messages: readonly PackableMessage[],
  packs: boolean,
): { records: BatchRecords; bytes: number; transfer: ArrayBuffer[] } {
  if (packs) {
    const packed = packMessages(messages);
    return {
      records: packed,
      bytes: packedBytes(packed),
      transfer: [packed.meta.buffer as ArrayBuffer, packed.data.buffer as ArrayBuffer],
    };
  }
  // A record read in place is a RawMessage already (src/common/fetched-record.ts): handed on as it is,
  // the fetched array too when every record is one; others are copied with their numbers.
  let bytes = 0;
  let copies = false;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    bytes += PACKED_META_BYTES + (m.key?.byteLength ?? 0) + (m.value?.byteLength ?? 0);
    if (!(m instanceof FetchedRecord)) copies = true;
  }
  const records = copies
    ? messages.map((m): RawMessage =>
        m instanceof FetchedRecord
          ? m
          : {
              offsetNumber: offsetNumberOf(m),
              timestampNumber: timestampNumberOf(m),
              key: m.key,
              value: m.value,
            },
      )
    : (messages as readonly FetchedRecord[]);
  return { records, bytes, transfer: [] };
}

function sumSealed(replies: readonly { sealed: SealedSummary }[]): SealedSummary {
  return replies.reduce(
    (a, r) => ({
      parts: a.parts + r.sealed.parts,
      rows: a.rows + r.sealed.rows,
      bytes: a.bytes + r.sealed.bytes,
      sealed: [...a.sealed, ...r.sealed.sealed],
    }),
    { parts: 0, rows: 0, bytes: 0, sealed: [] as SealedPart[] },
  );
}
