import type { Logger } from '../common/logger';
import type { TopicPartitionKey } from '../common/offsets';
import type { LanceTable } from '../lance/lance-table';
import type { PartitionOwnership } from '../ownership/partition-ownership';

/**
 * Whether `owner` keeps the table (compaction, declared indexes): the owner of the first
 * partition of the first topic, by the chains it was given. Ownership moving can make
 * two replicas believe it for a moment; both kinds of maintenance tolerate that.
 */
export function maintainsTable(
  ownership: ReadonlyMap<TopicPartitionKey, PartitionOwnership>,
  owner: string,
): boolean {
  const first = [...ownership.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))[0];
  return first !== undefined && first[1].chain.at(-1)?.owner === owner;
}

/**
 * One compaction of the table. A commit conflict with a concurrent append is retried
 * inside; any other failure is logged, never fatal. Versions that stopped being the
 * latest `cleanupOlderThanMs` ago are removed with it, only below a cleanup fence
 * committed first (an insert-if-absent merge in flight from before meets it at its
 * commit): two compactors for a moment (ownership moving) are harmless, each keeps what
 * the other's in-flight commits may still need (LanceTable.optimize). True when it ran.
 */
export async function compact(
  lance: LanceTable,
  cleanupOlderThanMs: number,
  logger: Logger,
): Promise<boolean> {
  try {
    const t0 = performance.now();
    const outcome = await lance.optimize(cleanupOlderThanMs);
    if (!outcome) return false;
    logger.info(
      {
        event: 'lance.optimized',
        seconds: (performance.now() - t0) / 1000,
        fragmentsRemoved: outcome.fragmentsRemoved,
        fragmentsAdded: outcome.fragmentsAdded,
        versionsRemoved: outcome.versionsRemoved,
        bytesRemoved: outcome.bytesRemoved,
        ...(outcome.cutoff ? { versionsBefore: outcome.cutoff.toISOString() } : {}),
      },
      'compacted the table',
    );
    return true;
  } catch (error) {
    logger.warn({ event: 'lance.optimize.failed', err: error }, 'compaction failed; will try again');
    return false;
  }
}
