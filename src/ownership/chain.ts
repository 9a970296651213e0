import type { OwnerEpoch } from './owner-epoch';
import { threadFaults } from '../faults/thread-faults';

/**
 * The ownership chain of a partition, kept in Kafka itself: every commit carries in
 * its offset metadata a short chain of (owner, epoch, start offset), and at every
 * group join each member appends an entry for every partition it was assigned
 * (committing its start offset) before it stages a record of it.
 *
 * An entry is one owner epoch (owner-epoch.ts) with the offset it started at: the
 * epoch number is the staging epoch of the owner process (bumped at each of its joins,
 * recorded in every part it stages), so a part maps to exactly one entry of each of its
 * partitions' chains.
 */
export interface ChainEntry extends OwnerEpoch {
  /** The first offset this epoch consumed (the committed offset when it began). */
  readonly start: number;
  /**
   * The incarnation of the topic the epoch consumed (Kafka's topic id); undefined in
   * entries written before topic ids were recorded, or when the broker has none. A
   * chain whose newest entry names another id than the topic has now belongs to a
   * deleted incarnation (ownership/claim.ts).
   */
  readonly topicId?: string;
}

/** The widest an entry can encode to, with its separating comma (a ULID owner, safe integers). */
const WIDEST_ENTRY_BYTES = Buffer.byteLength(
  `,["${'0'.repeat(26)}",${Number.MAX_SAFE_INTEGER},${Number.MAX_SAFE_INTEGER}]`,
);

/**
 * The broker's default offset.metadata.max.bytes is 4096; keep well inside it. A test
 * may lower it (the maxChainBytes fault, src/faults/) so that a chain drops its oldest
 * entries after a few rebalances instead of ~85.
 */
export const MAX_CHAIN_BYTES = 3_800;
const TAG = 'kl1';

/** This thread's bound: MAX_CHAIN_BYTES, or the lowered one of a test's faults. */
export function chainBound(): number {
  const lowered = threadFaults().maxChainBytes;
  if (lowered === undefined) return MAX_CHAIN_BYTES;
  // Two entries at least: the newest epoch and the one it may still have to resolve.
  if (lowered < 2 * WIDEST_ENTRY_BYTES)
    throw new Error(
      `KAFKA_LANCE_TEST_MAX_CHAIN_BYTES must be at least ${2 * WIDEST_ENTRY_BYTES}, not ${lowered}`,
    );
  return lowered;
}

/**
 * An entry's topic id is written only where it differs from the entry before it (and
 * on the first entry), and read back as inherited: the id costs ~25 bytes once, not
 * once per entry, so the chain keeps its length in epochs. Entries dropped from the
 * front (appendEpoch) take nothing with them, since the first kept entry writes it.
 */
export function encodeChain(chain: readonly ChainEntry[]): string {
  return JSON.stringify({
    [TAG]: chain.map((e, i) =>
      e.topicId !== undefined && (i === 0 || chain[i - 1]!.topicId !== e.topicId)
        ? [e.owner, e.epoch, e.start, e.topicId]
        : [e.owner, e.epoch, e.start],
    ),
  });
}

/** Parses offset metadata; anything that is not a kafka-lance chain (or is empty) is an empty chain. */
export function decodeChain(metadata: string | null | undefined): ChainEntry[] {
  if (!metadata) return [];
  try {
    const parsed = JSON.parse(metadata) as Record<string, unknown>;
    const raw = parsed[TAG];
    if (!Array.isArray(raw)) return [];
    let topicId: string | undefined;
    return raw.flatMap((e: unknown) => {
      if (
        !Array.isArray(e) ||
        typeof e[0] !== 'string' ||
        !Number.isSafeInteger(e[1]) ||
        !Number.isSafeInteger(e[2])
      )
        return [];
      if (typeof e[3] === 'string') topicId = e[3];
      const entry: ChainEntry = { owner: e[0], epoch: e[1] as number, start: e[2] as number };
      return [topicId === undefined ? entry : { ...entry, topicId }];
    });
  } catch {
    return [];
  }
}

/** Appends an epoch, dropping the oldest entries until the encoded chain fits. */
export function appendEpoch(chain: readonly ChainEntry[], entry: ChainEntry): ChainEntry[] {
  const next = [...chain, entry];
  while (next.length > 1 && Buffer.byteLength(encodeChain(next)) > chainBound()) next.shift();
  return next;
}

/**
 * Whether the chain may have dropped older entries: it has no room left for one more
 * entry of the widest kind. A chain that dropped its oldest entry is always this full
 * (it was over the bound before the drop, and one entry is at most that wide), and
 * every later append keeps it so. A chain with room to spare that lacks an epoch did
 * not lose it to the bound: its metadata was replaced (an operator's offset reset, the
 * group's offsets expired), and nothing can be concluded from it (DESIGN.md, "Scale-down
 * and old epochs").
 */
export function mayHaveDroppedEntries(chain: readonly ChainEntry[]): boolean {
  // The planner asks for every range of every part at every run, of the same few chain
  // objects (one per partition per snapshot): encode each once.
  let full = fullness.get(chain);
  if (full === undefined) {
    full = chain.length > 0 && Buffer.byteLength(encodeChain(chain)) + WIDEST_ENTRY_BYTES > chainBound();
    fullness.set(chain, full);
  }
  return full;
}

const fullness = new WeakMap<readonly ChainEntry[], boolean>();
