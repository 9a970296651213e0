import type { OwnershipEpoch } from './chain';

/**
 * What an ownership epoch may publish of a partition: offsets in [start, ceiling).
 * `ceiling` is always exclusive and always the same number: the start of the next
 * entry in the chain (the next owner consumed from there), or, while the epoch is
 * the newest entry, the partition's last landed commit (DESIGN.md, "Ceiling rule").
 */
export type PublishableRange =
  | {
      readonly kind: 'found';
      readonly start: number;
      readonly ceiling: number;
      /** The epoch is the newest in the chain: its ceiling is the landed commit and still moves while it runs. */
      readonly newest: boolean;
    }
  /**
   * The chain has no entry for this epoch: either it no longer reaches back that far
   * (truncated), or the snapshot predates the epoch's claim. Never guessed at: the
   * part waits for a snapshot that holds the entry.
   */
  | { readonly kind: 'unknown' };

/**
 * The publishable range of the rows `owner` staged in `epoch`. The entry must match
 * exactly: every join claims every assigned partition under the new epoch, so a
 * part's epoch always has its own entry. (Matching "the newest entry at or before
 * the epoch" instead let a snapshot taken before a re-claim give a part of the new
 * epoch the old epoch's ceiling, and cut committed rows.)
 */
export function publishableRange(
  chain: readonly OwnershipEpoch[],
  owner: string,
  epoch: number,
  committed: number,
): PublishableRange {
  // The last match: a chain written before claims were idempotent may repeat an entry,
  // and the repeat is not a successor (it would give the epoch an empty range).
  let index = -1;
  chain.forEach((e, i) => {
    if (e.owner === owner && e.epoch === epoch) index = i;
  });
  if (index < 0) return { kind: 'unknown' };
  const entry = chain[index]!;
  const next = chain[index + 1];
  return {
    kind: 'found',
    start: entry.start,
    ceiling: next ? next.start : committed,
    newest: next === undefined,
  };
}
