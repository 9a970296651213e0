import type { ChainEntry } from './chain';

/** What the broker says of a partition: its ownership chain and its last landed commit. */
export interface PartitionOwnership {
  readonly chain: readonly ChainEntry[];
  readonly committed: number;
  /**
   * The partition's topic is gone (a topic a pattern matched was deleted): its last known
   * chain and commit, which never change again. Parts committed under them stay publishable.
   */
  readonly final?: true;
}

/**
 * One partition's ownership in a snapshot of the group's committed offsets, as it
 * crosses to the materializer's thread: [topic, partition, ownership].
 */
export type OwnershipRow = readonly [topic: string, partition: number, ownership: PartitionOwnership];
