import type { WriteMode } from './lance-table';

/**
 * The object-store commit rule (DESIGN.md, "Object storage"): a publication is final
 * when Lance says so, and counted only when Lance cannot say.
 *
 * It holds because no commit of this replica can be overwritten by another: the store
 * commits with put-if-absent (a local directory, an atomic object store, an s3+ddb://
 * commit table), or this replica is the table's declared only writer and its own commits
 * never race each other. `startLanceStore` (store-start.ts) refuses to start otherwise;
 * `LanceTable` runs its adds one at a time; and the decisions below keep the rest of a
 * single writer's commits (publications, index builds) apart. The publisher asks this
 * module; it decides nothing about commits itself.
 */

/** How this replica's commits are kept from overwriting each other (store-start.ts decides it at start). */
export type CommitSafety = 'atomic' | 'single-writer';

export function commitSafetyOf(storeAtomic: boolean): CommitSafety {
  return storeAtomic ? 'atomic' : 'single-writer';
}

/**
 * Publications that may write at once: two (one writes while the next is prepared and
 * written) only where Lance reconciles concurrent commits; a single writer's schema commit
 * (addColumns) of one publication could overwrite the other's add.
 */
export function publicationsInFlight(safety: CommitSafety, streamed: boolean): 1 | 2 {
  return streamed && safety === 'atomic' ? 2 : 1;
}

/**
 * Whether commits other than the publications (declared index builds, on their own
 * connection) may run beside them. Compaction is not one of them: it runs between the
 * publications, in their loop, so it never races one (also for a single writer).
 */
export function commitsBesidePublications(safety: CommitSafety): boolean {
  return safety === 'atomic';
}

/**
 * A fulfilled append (or upsert merge) is a commit no concurrent writer can undo: final without a look.
 * A rejected add may still have committed (LanceDB reloads the latest version after its
 * commit and can fail there), and an insert-if-absent may find rows of other owners:
 * both are counted, once, at once (on the newest version by number, newest-by-number.ts).
 */
export function finalWithoutCount(write: WriteMode, addFailed: boolean): boolean {
  return !addFailed && write !== 'insert-if-absent';
}

/**
 * Whether a publication whose outcome Lance did not give (a rejected write, a `writing`
 * record after a crash) is settled by writing it again rather than by a count. An upsert's
 * rows replace and are replaced by others, so a count of its offset runs says nothing; its
 * merge changes a key's row only for a newer position, so writing it again is a no-op for
 * what landed and lands what did not (docs/design/upserts.md).
 */
export function resolvedByReplay(write: WriteMode): boolean {
  return write === 'upsert';
}

/**
 * What the count of a publication's offset runs says:
 * - `in-table`: all its rows are there: published (also after a rejected add);
 * - `explain-surplus`: an insert-if-absent that resolved finds more rows than it holds:
 *   published if the table explains them (each of its row keys there once), otherwise
 *   treated as `not-in`;
 * - `partial`: some of an append's rows: a Lance add is one commit, so this is not ours
 *   to repair (the table stops);
 * - `not-in`: the write did not land: retried from `writing`, where an insert-if-absent
 *   inserts only the absent keys.
 */
export type CountedOutcome = 'in-table' | 'explain-surplus' | 'partial' | 'not-in';

/** `justWritten`: the count follows a write of this process (undefined: recovery of `writing`). */
export function countedOutcome(
  write: WriteMode,
  found: number,
  rows: number,
  justWritten: { readonly addFailed: boolean } | undefined,
): CountedOutcome {
  if (found === rows) return 'in-table';
  if (justWritten && !justWritten.addFailed && write === 'insert-if-absent' && found > rows)
    return 'explain-surplus';
  return mayHoldPart(write, found, rows) ? 'not-in' : 'partial';
}

/**
 * Whether the table may hold `found` (not `rows`) of a publication's rows without a
 * fault, so that writing it (again) is right. An append is one commit: all or none.
 * An insert-if-absent may find part of its rows inserted by another owner's
 * publication of the same records (a revoked replica's, late), or more rows than it
 * holds (those records published under an earlier transform that emitted more rows
 * per record): inserting adds only the absent keys, and the check after the write
 * tells a surplus the table explains from a duplicate.
 */
function mayHoldPart(write: WriteMode, found: number, rows: number): boolean {
  if (found === 0) return true;
  return write === 'insert-if-absent' && found !== rows;
}
