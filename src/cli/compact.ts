import { silentLogger } from '../common/logger';
import type { ResolvedConsumer } from '../config';
import { IndexKeeper, type IndexReport } from '../lance/index-keeper';
import { retryConflicts } from '../lance/commit-retry';
import { commitCleanupFence, safeCleanupCutoff } from '../lance/table-cleanup';
import { ensureSystemIndexes } from '../lance/table-schema';
import { agedDeletesFilter } from './aged-deletes';
import { CliError } from './errors';
import { datasetPathOf, openExistingTable, tableShape, type TableShape } from './lance-read';

/** LanceDB's own default for version cleanup (OptimizeOptions.cleanupOlderThan). */
export const DEFAULT_RETENTION = '7d';

const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

/** "1h", "90m", "1h30m", "7d", "500ms" → milliseconds. */
export function parseDuration(text: string): number {
  const trimmed = text.trim();
  const parts = [...trimmed.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== trimmed) {
    throw new CliError(
      'BAD_ARGUMENT',
      `"${text}" is not a duration; write it like 30m, 1h, 1h30m or 7d (units ms, s, m, h, d, w)`,
      { text },
    );
  }
  return parts.reduce((ms, p) => ms + Number(p[1]) * UNIT_MS[p[2]!]!, 0);
}

export interface CompactResult {
  readonly path: string;
  readonly retentionMs: number;
  readonly before: TableShape;
  readonly after: TableShape;
  readonly fragmentsRemoved: number;
  readonly fragmentsAdded: number;
  readonly versionsRemoved: number;
  readonly bytesRemoved: number;
  /** The declared indexes after one round of the index keeper (built, updated or waiting). */
  readonly indexes: readonly IndexReport[];
  /** Upsert tables, with a purge asked for: `_deleted` rows removed for good. */
  readonly purgedDeletes?: number;
}

/**
 * Compacts the table's small fragments, folds new rows into its indexes and removes
 * versions that stopped being the latest longer than the retention ago (LanceDB
 * optimize, with the replicas' cutoff, `safeCleanupCutoff`). Safe while replicas append
 * on a store with atomic commits (not beside a declared single writer, lance.singleWriter):
 * a compaction commits like any writer and Lance rebases it; a reader on a removed
 * version must reopen the table. Versions are removed only below a cleanup fence
 * committed first, so that an insert-if-absent merge still in flight from before
 * meets it at its commit (table-cleanup.ts, commitCleanupFence). Then one round of the
 * declared indexes (build what the table can train, fold in new rows): on a store without
 * atomic commits, where replicas build none, this is how they are built, in a quiet window.
 */
export async function compact(
  consumer: ResolvedConsumer,
  retentionMs: number,
  purgeDeletesBefore?: number,
): Promise<CompactResult> {
  const opened = await openExistingTable(consumer);
  try {
    const before = await tableShape(opened.table);
    let purgedDeletes: number | undefined;
    if (purgeDeletesBefore !== undefined) {
      if (!consumer.upsertKey)
        throw new CliError(
          'BAD_ARGUMENT',
          `${consumer.name} is not an upsert table: it keeps no delete rows`,
        );
      // Removing a delete is safe only when no record of its key older than it can still be
      // published: the operator asserts that for deletes that landed before the cutoff.
      const filter = await agedDeletesFilter(opened.db, opened.table, consumer.table, purgeDeletesBefore);
      purgedDeletes = filter === undefined ? 0 : await opened.table.countRows(filter);
      // Before the compaction, which then rewrites the fragments without them.
      if (filter !== undefined && purgedDeletes > 0) await opened.table.delete(filter);
    }
    const keepFrom = await commitCleanupFence(opened.table, consumer.table);
    // The replicas' cutoff: a version goes once it stopped being the latest retentionMs ago.
    const cutoff = safeCleanupCutoff(await opened.table.listVersions(), Date.now() - retentionMs, keepFrom);
    // A table no replica compacted yet has no system index (ensureTableSchema): built here.
    await retryConflicts(() => ensureSystemIndexes(opened.table, consumer.upsertKey));
    const stats = await opened.table.optimize({ cleanupOlderThan: new Date(cutoff) });
    const indexes = await declaredIndexesRound(consumer, opened.uri);
    await opened.table.checkoutLatest();
    const after = await tableShape(opened.table);
    return {
      path: datasetPathOf(opened.uri, consumer.table),
      retentionMs,
      before,
      after,
      fragmentsRemoved: stats.compaction.fragmentsRemoved,
      fragmentsAdded: stats.compaction.fragmentsAdded,
      versionsRemoved: stats.prune.oldVersionsRemoved,
      bytesRemoved: stats.prune.bytesRemoved,
      indexes,
      ...(purgedDeletes !== undefined ? { purgedDeletes } : {}),
    };
  } finally {
    opened.close();
  }
}

async function declaredIndexesRound(consumer: ResolvedConsumer, uri: string): Promise<IndexReport[]> {
  if (consumer.indexes.length === 0) return [];
  const keeper = await IndexKeeper.connect(
    {
      uri,
      table: consumer.table,
      ...(consumer.lance.storageOptions ? { storageOptions: consumer.lance.storageOptions } : {}),
    },
    consumer.indexes,
    silentLogger(),
  );
  try {
    return await keeper.maintain();
  } finally {
    keeper.close();
  }
}
