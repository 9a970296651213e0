import { KafkaLanceError } from '../common/errors';

/**
 * How a publication learns that its rows are in the table for good.
 *
 * On a store with put-if-absent (a local directory, a store the probe finds atomic)
 * one Lance `add` is one commit that no concurrent writer can undo: a single count
 * of the publication's offset runs after the add is all the check does.
 *
 * On a store without it (s3proxy, S3 API servers that ignore If-None-Match) a
 * concurrent writer that read the same version commits the same version number and
 * the last manifest written wins: a fulfilled add can vanish, a rejected one can have
 * committed. A version can only be overwritten by a commit already in flight when it
 * appeared (each commit lists the latest version, then writes the next one; the gap
 * is its clobbering window, measured on s3proxy at ≤ 0.7 s under 4 writers). So the
 * rows are counted, on a new connection, `settleMs` after the add ended; present →
 * final; absent → the same rows are added again; part of them → not ours to repair.
 * See DESIGN.md "Object storage".
 */
export interface CommitCheck {
  /** The store makes concurrent Lance commits atomic (no settle wait, one count). */
  readonly atomic: boolean;
  /** Non-atomic store: wait after an add before the count that decides. */
  readonly settleMs: number;
  /** Adds of one publication lost to concurrent commits before it is failed (retried later as `writing`). */
  readonly maxAdds: number;
}

/** Twice the longest add measured under four concurrent writers on s3proxy (0.7 s). */
export const DEFAULT_SETTLE_MS = 1_500;
export const DEFAULT_MAX_ADDS = 10;

export const ATOMIC_STORE: CommitCheck = { atomic: true, settleMs: 0, maxAdds: 1 };

export function nonAtomicStore(settleMs = DEFAULT_SETTLE_MS, maxAdds = DEFAULT_MAX_ADDS): CommitCheck {
  return { atomic: false, settleMs, maxAdds };
}

/** A publication's commit was overwritten too often (or an atomic store lost one): it stays `writing` and is retried. */
export class CommitLostError extends KafkaLanceError {
  constructor(planId: string, table: string, adds: number, atomic: boolean) {
    super(
      'LANCE_WRITE_FAILED',
      atomic
        ? `publication ${planId}: the add resolved but table ${table} does not hold its rows (a store reported atomic lost a commit)`
        : `publication ${planId}: ${adds} adds into table ${table} were all overwritten by concurrent commits; retrying later`,
      { retriable: true, context: { planId, table, adds, atomic } },
    );
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
