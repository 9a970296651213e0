import type { LanceTarget } from '../lance/lance-table';
import type { OwnershipEpoch } from '../kafka/ownership';
import type { MaterializerStats } from './materializer';
import type { PreparationMode } from './publisher';

export interface MaterializerWorkerInit {
  readonly tableDir: string;
  readonly lance: LanceTarget;
  readonly owner: string;
  readonly mode: PreparationMode;
  readonly maxPublicationBytes: number;
  readonly maxPublicationDelayMs: number;
  readonly fetchPermits: number;
  readonly decodePermits: number;
  readonly sourceReservationBytes: number;
  readonly pollMs: number;
  readonly optimizeEveryMs: number;
  readonly logLevel: string;
}

/** [topic, partition, chain, committed offset] */
export type OwnershipRow = readonly [string, number, readonly OwnershipEpoch[], number];

export type MaterializerRequest =
  { readonly type: 'ownership'; readonly partitions: readonly OwnershipRow[] } | { readonly type: 'stop' };

export type MaterializerReply =
  | { readonly type: 'ready' }
  | { readonly type: 'stats'; readonly stats: MaterializerStats }
  | { readonly type: 'stopped' }
  | { readonly type: 'fatal'; readonly message: string };
