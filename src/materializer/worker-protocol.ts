import type { SealedPart } from '../staging/sealed-part';
import type { OwnershipRow } from '../ownership/partition-ownership';
import type { MaterializerOptions } from './materializer';
import type { IndexSpec } from '../config/index-spec';
import type { IndexReport } from '../lance/index-keeper';
import type { LanceTarget } from '../lance/lance-table';
import type { TableExpectations } from '../lance/table-opening';
import type { TableReport } from './table-set';

/**
 * What the worker needs to build a Materializer for each table it serves (everything but
 * what cannot cross threads), plus its loop's timing. Tables are the directories under
 * `stagingRoot`; each one's Lance target is `lance` with the directory's name as table.
 */
export interface MaterializerWorkerInit extends Omit<
  MaterializerOptions,
  'logger' | 'hooks' | 'onPublished' | 'tableDir' | 'lance' | 'shared' | 'connections'
> {
  /** `<dataDir>/staging`: one table per directory under it (tableStagingDir). */
  readonly stagingRoot: string;
  /** The Lance database (uri, store options); the table is each staging directory's name. */
  readonly lance: Omit<LanceTarget, 'table'>;
  /** What every table must accept (declared types, mode), checked when the table is first opened. */
  readonly expectations: TableExpectations;
  /**
   * The definition's one table (undefined when it routes): always served, with nothing
   * staged too (an index build a crash interrupted is finished, as ever), never closed as
   * idle, and a publication found half in it stops the worker (the replica's fatal). Routing
   * to many tables stalls only the damaged table.
   */
  readonly fixedTable: string | undefined;
  readonly pollMs: number;
  readonly optimizeEveryMs: number;
  /** Declared indexes, built and updated every indexEveryMs by the replica that keeps the tables. */
  readonly indexes: readonly IndexSpec[];
  readonly indexEveryMs: number;
  /** Distinct `table` label values the host's metrics keep before `_other` (metrics.maxTableLabels). */
  readonly maxTableLabels: number;
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
  /** Tables' states and stats: every table after a round, one table after each of its publications. */
  | { readonly type: 'stats'; readonly tables: readonly TableReport[] }
  /** Where each declared index of a table stands after a maintenance round (this replica keeps the tables). */
  | { readonly type: 'indexes'; readonly table: string; readonly reports: readonly IndexReport[] }
  | { readonly type: 'stopped' }
  | { readonly type: 'fatal'; readonly message: string };
