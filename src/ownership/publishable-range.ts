import { mayHaveDroppedEntries, type ChainEntry } from './chain';

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
   * The chain dropped this epoch's entry (it is full, and the epoch is older than its
   * oldest entry). Claim starts never decrease along a chain (a claim starts at the
   * committed offset, and commits only move forward), so the epoch's ceiling is at most
   * `below`, the oldest retained entry's start: its rows at or above it are cut (a later
   * epoch re-consumed them). Its rows below are all committed, but some may be a redundant
   * copy of rows a later, also dropped, epoch owns: they are kept and published
   * insert-if-absent on the row key, which makes such a copy harmless (DESIGN.md,
   * "Scale-down and old epochs").
   */
  | { readonly kind: 'superseded'; readonly below: number }
  /**
   * The chain has no entry for this epoch and did not drop one (its metadata was replaced,
   * or the snapshot predates the epoch's claim). Never guessed at: the part waits for a
   * snapshot that holds the entry.
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
  chain: readonly ChainEntry[],
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
  if (index < 0)
    return mayHaveDroppedEntries(chain)
      ? { kind: 'superseded', below: chain[0]!.start }
      : { kind: 'unknown' };
  const entry = chain[index]!;
  const next = chain[index + 1];
  return {
    kind: 'found',
    start: entry.start,
    ceiling: next ? next.start : committed,
    newest: next === undefined,
  };
}

/**
 * Whether rows of this epoch should go into Lance insert-if-absent even though the chain
 * still holds the epoch (or the plan was written while it did): its entry is in the older
 * half of a full chain, or gone. A publication of a dropped epoch (`superseded`) may carry
 * a redundant copy of rows that another dropped epoch owns; if that owner's plain append
 * landed after the insert-if-absent, the rows would be doubled (an append checks no key).
 * Switching to insert-if-absent while half a chain of claims still separates an epoch from
 * its drop leaves only an append already running while that many rebalances happen.
 */
export function nearChainEnd(
  chain: readonly ChainEntry[],
  owner: string,
  epoch: number,
  liveOwner: string,
): boolean {
  if (!mayHaveDroppedEntries(chain)) return false;
  const index = chain.findLastIndex((e) => e.owner === owner && e.epoch === epoch);
  // An epoch of this process newer than the snapshot is the newest there is, not old.
  if (index < 0) return !(owner === liveOwner && chain.every((e) => e.owner !== owner || e.epoch < epoch));
  return index < Math.floor(chain.length / 2);
}
