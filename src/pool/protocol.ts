import type { DeadLetterVerdict } from '../decode/dead-letter-reason';
import type { StagingEpoch } from '../staging/epoch';
import type { PackedMessages } from './packed-messages';

/** [topic, partition, offset] */
export type PartitionOffset = readonly [string, number, number];

export interface StagingWorkerInit {
  readonly consumerPath: string;
  /** The brokers the main thread resolved (the worker re-validates the definition with them). */
  readonly brokers: readonly string[];
  readonly tableDir: string;
  readonly workerIndex: number;
  readonly epoch: StagingEpoch;
  readonly maxPartBytes: number;
  readonly maxPartAgeMs: number;
  /** This worker's share of the replica's open-part bound. */
  readonly maxOpenParts: number;
  readonly logLevel: string;
}

/** Main thread → staging worker. Every request has an id; the reply carries it back. */
export type WorkerRequest =
  | {
      readonly type: 'batch';
      readonly id: number;
      readonly topic: string;
      readonly partition: number;
      readonly packed: PackedMessages;
    }
  | { readonly type: 'sync'; readonly id: number }
  | { readonly type: 'flush'; readonly id: number; readonly force: boolean }
  | {
      readonly type: 'epoch';
      readonly id: number;
      readonly epoch: StagingEpoch;
      /** Partitions lost: their high-water drops to the ceiling (last landed commit - 1). */
      readonly revoked: readonly PartitionOffset[];
      /** Partitions gained: their high-water is set to the start offset - 1. */
      readonly assigned: readonly PartitionOffset[];
    }
  | { readonly type: 'close'; readonly id: number };

export interface BatchDone {
  readonly staged: number;
  readonly skipped: number;
  readonly deadLetters: readonly DeadLetterVerdict[];
  readonly stagedBytes: number;
}

export interface SealedSummary {
  readonly parts: number;
  readonly rows: number;
  readonly bytes: number;
}

export type WorkerReply =
  | { readonly type: 'ready' }
  | { readonly type: 'batch'; readonly id: number; readonly result: BatchDone }
  | {
      readonly type: 'sync';
      readonly id: number;
      readonly durable: readonly PartitionOffset[];
      readonly parts: { readonly open: number; readonly sealing: number };
    }
  | { readonly type: 'flush' | 'epoch' | 'close'; readonly id: number; readonly sealed: SealedSummary }
  | {
      readonly type: 'error';
      readonly id: number | undefined;
      readonly message: string;
      readonly fatal: boolean;
    };
