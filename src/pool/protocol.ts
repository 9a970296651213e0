import type { SealedPart } from '../staging/sealed-part';
import type { DeadLetterVerdict } from '../dead-letters/dead-letter-reason';
import type { KnownField } from '../decode/record-decoder';
import type { StagingEpoch } from '../staging/epoch';
import type { RawMessage } from '../decode/raw-message';
import type { PackedMessages } from './packed-messages';
import type { WriterSchema } from '../schema-registry/wire-format';

/** [topic, partition, offset] */
export type PartitionOffset = readonly [string, number, number];

export interface StagingWorkerInit {
  readonly consumerPath: string;
  /** `schema: 'infer'`: the table's existing column types, so every worker infers the same ones. */
  readonly knownFields: readonly KnownField[];
  /** A registry `keyFormat`: the table's `_key` Arrow type, so every worker holds keys to it. */
  readonly tableKeyType?: string;
  /** The brokers the main thread resolved (the worker re-validates the definition with them). */
  readonly brokers: readonly string[];
  readonly tableDir: string;
  /**
   * The replica's data directory: a routing consumer stages each table in
   * `<dataDir>/staging/<table>/` (and reads its Lance table under the same default uri).
   */
  readonly dataDir?: string;
  readonly workerIndex: number;
  readonly epoch: StagingEpoch;
  readonly maxPartBytes: number;
  readonly maxPartAgeMs: number;
  /** This worker's share of the replica's open-part bound. */
  readonly maxOpenParts: number;
  readonly logLevel: string;
}

/**
 * A batch's records: packed into two transferable buffers for a worker thread, or the
 * messages themselves for a lane on the main thread (no copy).
 */
export type BatchRecords = PackedMessages | readonly RawMessage[];

/** Main thread → staging worker. Every request has an id; the reply carries it back. */
export type WorkerRequest =
  | {
      readonly type: 'batch';
      readonly id: number;
      readonly topic: string;
      readonly partition: number;
      readonly records: BatchRecords;
      /**
       * The last offset the batch accounts for: its last record, or a later offset that
       * holds nothing deliverable (compacted away, aborted, a transaction marker, gone
       * to retention). Durable with the batch. A batch of no records covers a gap only.
       */
      readonly through: number;
      /** The staging epoch the batch was admitted in: a batch that reaches a newer epoch is dropped unstaged. */
      readonly epoch: number;
      /** Registry formats: what the registry said of every schema id in the batch (fetched by the main thread). */
      readonly schemas: readonly WriterSchema[];
    }
  | { readonly type: 'sync'; readonly id: number }
  | { readonly type: 'flush'; readonly id: number; readonly force: boolean }
  | {
      readonly type: 'epoch';
      readonly id: number;
      readonly epoch: StagingEpoch;
      /** Partitions lost: their high-water drops to the ceiling (last landed commit - 1). */
      readonly revoked: readonly PartitionOffset[];
      /** Partitions claimed in this epoch (every join claims all it is assigned): high-water = start - 1. */
      readonly assigned: readonly PartitionOffset[];
    }
  | { readonly type: 'close'; readonly id: number };

export interface BatchDone {
  /** The batch was admitted in an older epoch than staging's: nothing of it was staged or decoded. */
  readonly dropped: boolean;
  readonly staged: number;
  readonly skipped: number;
  readonly deadLetters: readonly DeadLetterVerdict[];
  readonly stagedBytes: number;
  /** Routed lanes: what each table staged of the batch (the metrics' `table` label is the table's, not the template). */
  readonly byTable?: readonly TableStaged[];
}

export interface TableStaged {
  readonly table: string;
  readonly staged: number;
  readonly stagedBytes: number;
}

/** One worker's durability tick: the highest durable offset per partition, as of a staging epoch. */
export interface DurableReport {
  readonly epoch: number;
  readonly offsets: readonly PartitionOffset[];
  /** Ids of the worker's parts not yet sealed (open, or being sealed) when it replied. */
  readonly unsealed: readonly string[];
}

export interface SealedSummary {
  readonly parts: number;
  readonly rows: number;
  readonly bytes: number;
  /** What the writers know of the parts they sealed: the materializer's catalog takes them without reading them back. */
  readonly sealed: readonly SealedPart[];
}

export type WorkerReply =
  | { readonly type: 'ready' }
  | { readonly type: 'batch'; readonly id: number; readonly result: BatchDone }
  | {
      readonly type: 'sync';
      readonly id: number;
      /** The staging epoch the durable offsets belong to. */
      readonly epoch: number;
      readonly durable: readonly PartitionOffset[];
      readonly parts: { readonly open: number; readonly sealing: number };
      /** Ids of the parts not yet sealed (renamed to .arrows): see DurableReport. */
      readonly unsealed: readonly string[];
    }
  | { readonly type: 'flush' | 'epoch' | 'close'; readonly id: number; readonly sealed: SealedSummary }
  | {
      readonly type: 'error';
      readonly id: number | undefined;
      readonly message: string;
      readonly fatal: boolean;
      /** Set when the request met a full disk: retriable, staging is intact. */
      readonly diskFull?: { readonly path: string; readonly operation: string };
    };
