import type { SealedPart } from '../staging/sealed-part';
import type { OwnershipRow } from '../ownership/partition-ownership';
import type { MaterializerOptions } from './materializer';
import type { MaterializerStats } from './materializer-stats';
import type { IndexSpec } from '../config/index-spec';
import type { IndexReport } from '../lance/index-keeper';

/** What the worker needs to build its Materializer (everything but what cannot cross threads), plus its loop's timing. */
export interface MaterializerWorkerInit extends Omit<
  MaterializerOptions,
  'logger' | 'hooks' | 'onPublished'
> {
  readonly pollMs: number;
  readonly optimizeEveryMs: number;
  /** Declared indexes, built and updated every indexEveryMs by the replica that keeps the table. */
  readonly indexes: readonly IndexSpec[];
  readonly indexEveryMs: number;
  readonly logLevel: string;
}

export type MaterializerRequest =
  | {
      readonly type: 'ownership';
      readonly partitions: readonly OwnershipRow[];
      /** Increases with every snapshot read from the broker: an older one never replaces a newer one. */
      readonly sequence: number;
    }
  /** Parts this replica's staging sealed, as their writers describe them (no read back needed). */
  | { readonly type: 'sealed'; readonly parts: readonly SealedPart[] }
  /**
   * Finish the running publication, then publish what the last snapshot makes ready
   * (everything this replica committed, in 'staged' mode), starting nothing after
   * `drainUntil` (epoch ms), then end.
   */
  | { readonly type: 'stop'; readonly drainUntil: number };

export type MaterializerReply =
  | { readonly type: 'ready' }
  | { readonly type: 'stats'; readonly stats: MaterializerStats }
  /** Where each declared index stands after a maintenance round (this replica keeps the table). */
  | { readonly type: 'indexes'; readonly reports: readonly IndexReport[] }
  | { readonly type: 'stopped' }
  | { readonly type: 'fatal'; readonly message: string };
