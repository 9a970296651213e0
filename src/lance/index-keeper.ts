import * as lancedb from '@lancedb/lancedb';
import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import {
  indexName,
  isVectorIndex,
  vectorMinRows,
  type IndexSpec,
  type VectorIndexSpec,
} from '../config/index-spec';
import { retryConflicts, WorkStoppedError } from './commit-retry';
import { connectTarget, type SharedConnections } from './connect';
import type { LanceTarget } from './lance-table';
import { openTableIfCommitted } from './open-if-committed';

/** What one maintenance round did to one declared index, and where it stands after it. */
export interface IndexReport {
  readonly index: string;
  readonly column: string;
  readonly type: IndexSpec['type'];
  /**
   * waiting-column: the table has no such column yet; waiting-rows: too few rows to train;
   * created / retrained: built (again) from every row; updated: new rows folded in
   * (optimize); fresh: nothing to do; failed: logged, tried again next round.
   */
  readonly state:
    'waiting-column' | 'waiting-rows' | 'created' | 'retrained' | 'updated' | 'fresh' | 'failed';
  readonly indexedRows: number;
  readonly unindexedRows: number;
  /** How long the build or update took (undefined: none ran). */
  readonly seconds: number | undefined;
  /** Why the round failed (state failed). */
  readonly error?: string;
}

/**
 * Called as an index build begins (its one native call has no JavaScript point inside
 * it); returns what to call when the build ends. The materializer's test crash point
 * 'during-index-build' arms itself here: typed in lance, given by the caller.
 */
export type IndexBuildHook = () => () => void;

/**
 * Builds the declared indexes once the table can train them and keeps them fresh: new
 * rows are folded in by LanceDB's optimize (incremental: new fragments are assigned to
 * the trained partitions), and a vector index is trained again (createIndex, replace)
 * once more than `retrainShare` of its rows came after its last training.
 *
 * It has its own connection: LanceDB holds a table handle's write lock for a whole
 * createIndex, so sharing the publisher's handle would hold every publication for the
 * length of a build. Lance reconciles the commits themselves: an index commit does not
 * conflict with an append, and one that meets a compaction is retried here. A build
 * killed before its commit leaves unreferenced index files and no new version; the next
 * round builds it again (the rows never depended on it).
 */
export class IndexKeeper {
  #table: lancedb.Table | undefined;
  /** Rows a vector index was last trained on, as this process knows it (by index name). */
  readonly #trainedRows = new Map<string, number>();
  /** Unindexed rows each existing index had at this round's decision (by index name). */
  readonly #unindexed = new Map<string, number>();

  private constructor(
    private readonly target: LanceTarget,
    private readonly db: lancedb.Connection,
    private readonly specs: readonly IndexSpec[],
    private readonly logger: Logger,
    private readonly onBuild: IndexBuildHook | undefined,
    /** Gives a shared connection back; undefined: the connection is the keeper's own. */
    private readonly release: (() => void) | undefined,
  ) {}

  static async connect(
    target: LanceTarget,
    specs: readonly IndexSpec[],
    logger: Logger,
    onBuild?: IndexBuildHook,
    /** The worker's connections, shared by its tables (and their publications). */
    connections?: SharedConnections,
  ): Promise<IndexKeeper> {
    if (connections) {
      const lent = await connections.acquire(target, 'latest');
      return new IndexKeeper(target, lent.db, specs, logger, onBuild, () => lent.release());
    }
    const db = await connectTarget(target, 'latest');
    return new IndexKeeper(target, db, specs, logger, onBuild, undefined);
  }

  /**
   * One round over every declared index; resolves with nothing while the table does not
   * exist. Once `stopping` is aborted no build, retry or update begins (the one native
   * call in flight finishes: it is never abandoned), and the round ends without reports.
   */
  async maintain(stopping?: AbortSignal): Promise<IndexReport[]> {
    const table = await this.#open();
    if (!table) return [];
    const columns = new Set((await table.schema()).fields.map((f) => f.name));
    const existing = new Set((await table.listIndices()).map((i) => i.name));
    const decided: { spec: IndexSpec; state: IndexReport['state']; seconds?: number; error?: string }[] = [];
    for (const spec of this.specs) {
      if (stopping?.aborted) return [];
      if (!columns.has(spec.column)) {
        decided.push({ spec, state: 'waiting-column' });
        continue;
      }
      try {
        decided.push({
          spec,
          ...(await this.#step(table, spec, existing.has(indexName(spec)), stopping)),
        });
      } catch (error) {
        if (stopping?.aborted) return []; // not a failure: the replica is stopping
        this.#failed(spec, error);
        decided.push({ spec, state: 'failed', error: errorMessage(error) });
      }
    }
    const stale = decided.filter(
      (d) => d.state === 'fresh' && (this.#unindexed.get(indexName(d.spec)) ?? 0) > 0,
    );
    if (stopping?.aborted) return [];
    if (stale.length > 0) {
      const t0 = performance.now();
      try {
        // Compaction and index update in one (LanceDB optimize); no version cleanup here
        // (new Date(0)): that stays with scheduled compaction and its fence.
        await retryConflicts(() => table.optimize({ cleanupOlderThan: new Date(0) }), 8, stopping);
        const seconds = (performance.now() - t0) / 1000;
        for (const d of stale) Object.assign(d, { state: 'updated', seconds });
      } catch (error) {
        for (const d of stale) {
          this.#failed(d.spec, error);
          Object.assign(d, { state: 'failed', error: errorMessage(error) });
        }
      }
    }
    const reports: IndexReport[] = [];
    for (const d of decided) {
      const report = await this.#report(table, d.spec, d.state, d.seconds);
      reports.push(d.error !== undefined ? { ...report, error: d.error } : report);
    }
    for (const r of reports)
      if (r.state !== 'fresh' && r.state !== 'failed')
        this.logger.info({ event: `lance.index.${r.state}`, ...r }, `index ${r.index}: ${r.state}`);
    return reports;
  }

  close(): void {
    this.#table?.close();
    if (this.release) this.release();
    else this.db.close();
  }

  async #step(
    table: lancedb.Table,
    spec: IndexSpec,
    exists: boolean,
    stopping: AbortSignal | undefined,
  ): Promise<{ state: IndexReport['state']; seconds?: number }> {
    const name = indexName(spec);
    if (!exists) {
      const rows = isVectorIndex(spec)
        ? await table.countRows(`${quoted(spec.column)} IS NOT NULL`)
        : await table.countRows();
      const needed = isVectorIndex(spec) ? vectorMinRows(spec) : 1;
      if (rows < needed) return { state: 'waiting-rows' };
      return { state: 'created', seconds: await this.#build(table, spec, rows, stopping) };
    }
    const stats = await table.indexStats(name);
    const unindexed = stats?.numUnindexedRows ?? 0;
    this.#unindexed.set(name, unindexed);
    if (isVectorIndex(spec) && stats) {
      const total = stats.numIndexedRows + unindexed;
      // After a restart the last training is unknown: what the index holds now stands for it.
      const trained = this.#trainedRows.get(name) ?? stats.numIndexedRows;
      this.#trainedRows.set(name, trained);
      if (total > 0 && (total - trained) / total > spec.retrainShare) {
        const rows = await table.countRows(`${quoted(spec.column)} IS NOT NULL`);
        return { state: 'retrained', seconds: await this.#build(table, spec, rows, stopping) };
      }
    }
    return { state: 'fresh' };
  }

  /** createIndex (replacing any index of that name), retried on a commit conflict; seconds taken. */
  async #build(
    table: lancedb.Table,
    spec: IndexSpec,
    rows: number,
    stopping: AbortSignal | undefined,
  ): Promise<number> {
    const name = indexName(spec);
    if (stopping?.aborted) throw new WorkStoppedError(); // asked to stop while this round counted rows
    this.logger.info(
      { event: 'lance.index.build', index: name, column: spec.column, type: spec.type, rows },
      `building index ${name}`,
    );
    const t0 = performance.now();
    const built = this.onBuild?.();
    try {
      await retryConflicts(
        () => table.createIndex(spec.column, { config: indexConfig(spec), name, replace: true }),
        8,
        stopping,
      );
    } finally {
      built?.();
    }
    // The rows the index covers now, as indexStats counts them (rows with a null vector
    // included), so that the retrain share compares like with like.
    if (isVectorIndex(spec))
      this.#trainedRows.set(name, (await table.indexStats(name))?.numIndexedRows ?? rows);
    this.#unindexed.delete(name);
    return (performance.now() - t0) / 1000;
  }

  async #report(
    table: lancedb.Table,
    spec: IndexSpec,
    state: IndexReport['state'],
    seconds: number | undefined,
  ): Promise<IndexReport> {
    const base = { index: indexName(spec), column: spec.column, type: spec.type, state, seconds };
    if (state === 'waiting-column') return { ...base, indexedRows: 0, unindexedRows: 0 };
    const stats = await table.indexStats(indexName(spec)).catch(() => undefined);
    if (stats) return { ...base, indexedRows: stats.numIndexedRows, unindexedRows: stats.numUnindexedRows };
    // No index yet: every row is unindexed.
    return { ...base, indexedRows: 0, unindexedRows: await table.countRows() };
  }

  #failed(spec: IndexSpec, error: unknown): void {
    this.logger.warn(
      { event: 'lance.index.failed', index: indexName(spec), column: spec.column, err: errorMessage(error) },
      'index build or update failed; will try again',
    );
  }

  async #open(): Promise<lancedb.Table | undefined> {
    this.#table ??= await openTableIfCommitted(this.db, this.target.table);
    return this.#table;
  }
}

/** A column name in Lance's SQL (names are checked at start: no backtick inside). */
function quoted(column: string): string {
  return `\`${column}\``;
}

/** The LanceDB index for a declaration (only the options it sets; LanceDB's defaults otherwise). */
export function indexConfig(spec: IndexSpec): lancedb.Index {
  if (isVectorIndex(spec)) return vectorIndexConfig(spec);
  switch (spec.type) {
    case 'btree':
      return lancedb.Index.btree();
    case 'bitmap':
      return lancedb.Index.bitmap();
    case 'label_list':
      return lancedb.Index.labelList();
    case 'fts':
      return lancedb.Index.fts();
  }
}

function vectorIndexConfig(spec: VectorIndexSpec): lancedb.Index {
  const common = {
    distanceType: spec.metric,
    ...(spec.numPartitions !== undefined ? { numPartitions: spec.numPartitions } : {}),
  };
  switch (spec.type) {
    case 'ivf_pq':
      return lancedb.Index.ivfPq({
        ...common,
        ...(spec.numSubVectors !== undefined ? { numSubVectors: spec.numSubVectors } : {}),
        ...(spec.numBits !== undefined ? { numBits: spec.numBits } : {}),
      });
    case 'ivf_hnsw_sq':
      return lancedb.Index.hnswSq({
        ...common,
        ...(spec.m !== undefined ? { m: spec.m } : {}),
        ...(spec.efConstruction !== undefined ? { efConstruction: spec.efConstruction } : {}),
      });
    case 'ivf_flat':
      return lancedb.Index.ivfFlat(common);
  }
}
