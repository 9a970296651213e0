import type * as lancedb from '@lancedb/lancedb';
import { OFFSET_COLUMN } from '../staging/system-columns';
import { retryConflicts } from './commit-retry';
import { CleanupFenceError, isCommitConflict } from './lance-errors';

export interface OptimizeOutcome {
  readonly fragmentsRemoved: number;
  readonly fragmentsAdded: number;
  readonly versionsRemoved: number;
  readonly bytesRemoved: number;
  /** Versions created before this were removable; undefined: no cleanup asked. */
  readonly cutoff: Date | undefined;
}

/**
 * Compaction, index update and version cleanup (LanceDB optimize) of an open table; a
 * commit conflict is retried here. `cleanupOlderThanMs`: 0 keeps every version;
 * otherwise a version is removed only once it has not been the latest for that long
 * (see `safeCleanupCutoff`), never by LanceDB's own rule (created that long ago), which
 * on a store without atomic commits can delete the files of the version a publisher
 * still in flight builds on; and only below a cleanup fence committed first
 * (`commitCleanupFence`), which every insert-if-absent merge that read an older version
 * meets at its commit, however long it ran.
 */
export function optimizeWithCleanup(
  table: lancedb.Table,
  name: string,
  cleanupOlderThanMs: number,
  now: number,
): Promise<OptimizeOutcome> {
  // The handle reads the latest version (readConsistencyInterval 0), as listVersions lists all.
  return retryConflicts(async () => {
    let cutoff = 0;
    if (cleanupOlderThanMs > 0) {
      const keepFrom = await commitCleanupFence(table, name);
      cutoff = safeCleanupCutoff(await table.listVersions(), now - cleanupOlderThanMs, keepFrom);
    }
    // new Date(0): LanceDB's default (7 days) would otherwise apply; nothing is older than 1970.
    const stats = await table.optimize({ cleanupOlderThan: new Date(cutoff) });
    return {
      fragmentsRemoved: stats.compaction.fragmentsRemoved,
      fragmentsAdded: stats.compaction.fragmentsAdded,
      versionsRemoved: stats.prune.oldVersionsRemoved,
      bytesRemoved: stats.prune.bytesRemoved,
      cutoff: cutoff > 0 ? new Date(cutoff) : undefined,
    };
  });
}

/**
 * The `cleanupOlderThan` (ms since the epoch) that removes only versions superseded
 * before `retainSince`. LanceDB removes every version created before the cutoff except
 * the latest: after a quiet period, the version that was the latest until a moment ago
 * (and the compaction of this very call supersedes the latest) was created long ago.
 * A writer that read it as the latest just before (a publication in flight) commits a
 * manifest that keeps its fragments, whose files a compaction rewrote; on a store
 * without put-if-absent that manifest can replace the compaction's, and its files
 * must still exist. So the cutoff is the creation time of the version that was the
 * latest at `retainSince` (kept: LanceDB compares with `<`), or earlier if a later
 * version carries an earlier timestamp (another writer's clock).
 */
export function safeCleanupCutoff(
  versions: readonly { readonly version: number; readonly timestamp: Date }[],
  retainSince: number,
  keepFrom = Number.POSITIVE_INFINITY,
): number {
  const sorted = [...versions].sort((a, b) => a.version - b.version);
  let latestThen = -1;
  for (let i = 0; i < sorted.length; i++) if (sorted[i]!.timestamp.getTime() <= retainSince) latestThen = i;
  // Every version is newer than retainSince: nothing is removable.
  if (latestThen < 0) return 0;
  let cutoff = retainSince;
  for (const v of sorted.slice(latestThen)) cutoff = Math.min(cutoff, Math.floor(v.timestamp.getTime()));
  return keepFromCutoff(sorted, cutoff, keepFrom);
}

/**
 * `cutoff` lowered so that every version from `keepFrom` on (a cleanup fence and what
 * followed it) is kept, whatever clock stamped it: LanceDB removes by timestamp.
 */
export function keepFromCutoff(
  versions: readonly { readonly version: number; readonly timestamp: Date }[],
  cutoff: number,
  keepFrom: number,
): number {
  let kept = cutoff;
  for (const v of versions)
    if (v.version >= keepFrom) kept = Math.min(kept, Math.floor(v.timestamp.getTime()));
  return kept;
}

/**
 * Commits a cleanup fence and returns the lowest version a cleanup after it must keep.
 *
 * Lance checks a commit against the manifests written after its read version that
 * still exist: a version removed by cleanup is skipped. An insert-if-absent merge that
 * read the table before a cleanup and commits after it (a replica frozen inside its
 * merge, a whole-table join on a large table: no bound on how long) would then miss a
 * concurrent merge of the same keys whose version was removed, and insert its rows
 * twice. A replica knows only its own merges, so the rule rests on Lance's own check
 * instead of a bound on merge time: the fence is an update that matches no row, i.e.
 * an Update transaction without a key filter, which every key-checked merge-insert
 * committed after it conflicts with (Lance 12; measured, and test/lance/
 * cleanup-long-merge.test.ts holds it); such a merge runs again against the latest
 * version, inserting only absent keys, or fails and is retried as a publication. The
 * cleanup removes only versions below the fence (all that it keeps from `keepFrom` on
 * stays): whichever versions a merge that read before the fence misses, it cannot miss
 * the fence, and a later cleanup removes the fence only after committing its own.
 */
export async function commitCleanupFence(table: lancedb.Table, name: string): Promise<number> {
  const before = await table.version();
  let result: { rowsUpdated: number; version: number };
  try {
    // _offset is never negative (a Kafka offset): the update changes nothing and still commits.
    result = await table.update({
      where: `${OFFSET_COLUMN} < 0`,
      valuesSql: { [OFFSET_COLUMN]: OFFSET_COLUMN },
    });
  } catch (error) {
    if (isCommitConflict(error)) throw error;
    throw new CleanupFenceError(name, 'failed', error);
  }
  if (result.rowsUpdated !== 0 || result.version <= before) {
    throw new CleanupFenceError(
      name,
      `committed no new version (version ${result.version} after ${before}, ${result.rowsUpdated} rows updated)`,
    );
  }
  return before + 1;
}
