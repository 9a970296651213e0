/**
 * Ownership epochs of a partition, kept in Kafka itself: every commit carries in
 * its offset metadata a short chain of (owner, epoch, start offset), and a new
 * owner appends its own entry (committing its start offset) before it consumes.
 *
 * The ceiling of an epoch, below which its staged rows may be published, is the
 * start of the next entry in the chain, or the last landed commit while the epoch
 * is the newest one (DESIGN.md, "Ceiling rule" and "Ambiguous commits"). So rows of
 * one partition published by two replicas are disjoint by construction, even if an
 * old owner's last commit was lost in flight.
 */
export interface OwnershipEpoch {
  readonly owner: string;
  readonly epoch: number;
  /** The first offset this epoch consumed (the committed offset when it began). */
  readonly start: number;
}

/** The broker's default offset.metadata.max.bytes is 4096; keep well inside it. */
export const MAX_CHAIN_BYTES = 3_800;
const TAG = 'kl1';

export function encodeChain(chain: readonly OwnershipEpoch[]): string {
  return JSON.stringify({ [TAG]: chain.map((e) => [e.owner, e.epoch, e.start]) });
}

/** Parses offset metadata; anything that is not a kafka-lance chain (or is empty) is an empty chain. */
export function decodeChain(metadata: string | null | undefined): OwnershipEpoch[] {
  if (!metadata) return [];
  try {
    const parsed = JSON.parse(metadata) as Record<string, unknown>;
    const raw = parsed[TAG];
    if (!Array.isArray(raw)) return [];
    return raw.flatMap((e: unknown) =>
      Array.isArray(e) && typeof e[0] === 'string' && Number.isSafeInteger(e[1]) && Number.isSafeInteger(e[2])
        ? [{ owner: e[0], epoch: e[1] as number, start: e[2] as number }]
        : [],
    );
  } catch {
    return [];
  }
}

/** Appends an epoch, dropping the oldest entries until the encoded chain fits. */
export function appendEpoch(chain: readonly OwnershipEpoch[], entry: OwnershipEpoch): OwnershipEpoch[] {
  const next = [...chain, entry];
  while (next.length > 1 && Buffer.byteLength(encodeChain(next)) > MAX_CHAIN_BYTES) next.shift();
  return next;
}

export type CeilingLookup =
  | {
      readonly kind: 'found';
      readonly start: number;
      readonly ceiling: number;
      /** The epoch is the newest in the chain: its ceiling is the landed commit and still moves while it runs. */
      readonly newest: boolean;
    }
  /** The chain no longer reaches back to this epoch: its rows must not be guessed at. */
  | { readonly kind: 'unknown' };

/**
 * The publishable range [start, ceiling) of the rows an owner staged in a given
 * staging epoch. The owner's ownership epoch is its newest entry begun at or before
 * that staging epoch. `committed` is the partition's last landed commit (the ceiling
 * of the newest entry).
 */
export function ceilingOf(
  chain: readonly OwnershipEpoch[],
  owner: string,
  stagingEpoch: number,
  committed: number,
): CeilingLookup {
  let index = -1;
  chain.forEach((e, i) => {
    if (e.owner === owner && e.epoch <= stagingEpoch && (index < 0 || e.epoch >= chain[index]!.epoch))
      index = i;
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
