import {
  commitOffsetAfter,
  tpKey,
  type CommitOffset,
  type DurableOffset,
  type TopicPartitionKey,
} from '../common/offsets';
import { encodeChain, type ChainEntry } from './chain';

export interface PartitionCommit {
  readonly topic: string;
  readonly partition: number;
  readonly offset: CommitOffset;
  readonly metadata: string;
}

interface PartitionState {
  readonly topic: string;
  readonly partition: number;
  readonly chain: readonly ChainEntry[];
  /** The staging epoch the partition was claimed in: durable reports of older epochs are not ours to commit. */
  readonly epoch: number;
  /** The last commit known to have landed. */
  landed: CommitOffset;
  durable: DurableOffset;
  /**
   * Offsets no commit may pass: dead letters whose write is not durable yet, and the
   * offset where the dead-letter outbox stopped the partition.
   */
  readonly heldOffsets: Set<number>;
}

/**
 * What may be committed, per partition currently assigned: the highest offset `o`
 * such that every record `<= o` is durable (staged and fsynced, or dead-lettered
 * durably), plus one. Only this class decides commits; stages report facts to it.
 */
export class OffsetTracker {
  readonly #partitions = new Map<TopicPartitionKey, PartitionState>();

  /**
   * Starts tracking a partition whose claim (start offset, `chain`) landed in staging
   * epoch `epoch`. Replaces whatever was tracked for it: every join claims anew.
   */
  assign(
    topic: string,
    partition: number,
    start: CommitOffset,
    chain: readonly ChainEntry[],
    epoch: number,
  ): void {
    this.#partitions.set(tpKey(topic, partition), {
      topic,
      partition,
      chain,
      epoch,
      landed: start,
      durable: ((start as number) - 1) as DurableOffset,
      heldOffsets: new Set(),
    });
  }

  /** Stops tracking a lost partition; returns its last landed commit. */
  revoke(topic: string, partition: number): CommitOffset | undefined {
    const key = tpKey(topic, partition);
    const state = this.#partitions.get(key);
    this.#partitions.delete(key);
    return state?.landed;
  }

  owns(topic: string, partition: number): boolean {
    return this.#partitions.has(tpKey(topic, partition));
  }

  assigned(): { topic: string; partition: number; landed: CommitOffset }[] {
    return [...this.#partitions.values()].map((s) => ({
      topic: s.topic,
      partition: s.partition,
      landed: s.landed,
    }));
  }

  /**
   * Staging reports `offset` durable as of staging epoch `epoch`. A report from an
   * older epoch than the partition's claim is dropped: it was taken before the
   * re-claim reset the high-water, and its rows above the new start belong to the
   * old epoch (cut by the ceiling rule), so committing them would lose them.
   */
  noteDurable(topic: string, partition: number, offset: DurableOffset, epoch: number): void {
    const state = this.#partitions.get(tpKey(topic, partition));
    if (state && epoch === state.epoch && offset > state.durable) state.durable = offset;
  }

  /** No commit passes these offsets until they are released (a dead letter written durably). */
  holdOffsets(topic: string, partition: number, offsets: readonly number[]): void {
    const state = this.#partitions.get(tpKey(topic, partition));
    for (const o of offsets) state?.heldOffsets.add(o);
  }

  releaseOffsets(topic: string, partition: number, offsets: readonly number[]): void {
    const state = this.#partitions.get(tpKey(topic, partition));
    for (const o of offsets) state?.heldOffsets.delete(o);
  }

  /** Commits that would move a partition forward now. */
  commitsDue(): PartitionCommit[] {
    const due: PartitionCommit[] = [];
    for (const s of this.#partitions.values()) {
      let durable = s.durable;
      for (const o of s.heldOffsets) if (o <= durable) durable = (o - 1) as DurableOffset;
      const offset = commitOffsetAfter(durable);
      if (offset > s.landed)
        due.push({ topic: s.topic, partition: s.partition, offset, metadata: encodeChain(s.chain) });
    }
    return due;
  }

  /**
   * Of commits decided earlier in this epoch (held by the publication gate), those that
   * would still move an owned partition forward.
   */
  stillDue(commits: readonly PartitionCommit[]): PartitionCommit[] {
    return commits.filter((c) => {
      const state = this.#partitions.get(tpKey(c.topic, c.partition));
      return state !== undefined && c.offset > state.landed;
    });
  }

  /** Records commits that the broker acknowledged. */
  landed(commits: readonly PartitionCommit[]): void {
    for (const c of commits) {
      const state = this.#partitions.get(tpKey(c.topic, c.partition));
      if (state && c.offset > state.landed) state.landed = c.offset;
    }
  }
}
