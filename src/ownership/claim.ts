import type { CommitOffset } from '../common/offsets';
import { appendEpoch, decodeChain, encodeChain, type ChainEntry } from './chain';
import type { FencedCommitOutcome } from './commit-fence';
import type { PartitionCommit } from './offset-tracker';

/** What the broker holds for a partition of the group: its committed offset (-1: none) and metadata. */
export interface CommittedOffset {
  readonly offset: number;
  readonly metadata: string | null | undefined;
}

/** The broker calls a claim needs; the commit is fenced to the join the claim belongs to. */
export interface ClaimIo {
  committed(partitions: readonly (readonly [string, number])[]): Promise<(CommittedOffset | undefined)[]>;
  /** Where a partition with no committed offset starts (log start or end, per fromBeginning). */
  initialOffset(topic: string, partition: number): Promise<number>;
  /** The topics' ids (their incarnations); a topic absent from the answer has none known. */
  topicIds?(topics: readonly string[]): Promise<ReadonlyMap<string, string>>;
  /** Where a partition's log starts now (a recreated topic is consumed from there). */
  logStart?(topic: string, partition: number): Promise<number>;
  /** A committed position of a deleted incarnation was dropped (for the log). */
  recreated?(event: RecreatedTopic): void;
  /**
   * Runs `claim` as one turn of the fenced commit queue: no commit of this process can
   * land between its read of the committed offsets and its own commit.
   */
  commitTurn(
    claim: (send: (commits: readonly PartitionCommit[]) => Promise<unknown>) => Promise<unknown>,
  ): Promise<FencedCommitOutcome>;
}

export interface PartitionClaim {
  readonly topic: string;
  readonly partition: number;
  /** The first offset this epoch consumes: the committed offset when it was claimed. */
  readonly start: CommitOffset;
  readonly chain: readonly ChainEntry[];
  /** The topic's incarnation this epoch consumes; undefined when the broker cannot tell. */
  readonly topicId: string | undefined;
}

/** A partition whose committed offset and chain were written for another incarnation of its topic. */
export interface RecreatedTopic {
  readonly topic: string;
  readonly partition: number;
  readonly topicId: string;
  readonly previousTopicId: string;
  /** The committed offset dropped (it counts the deleted incarnation's records). */
  readonly droppedOffset: number;
  /** Where the new incarnation is consumed from: its log start. */
  readonly start: number;
}

/** A claim did not land: this epoch owns none of the partitions yet. */
export class ClaimError extends Error {
  constructor(
    readonly partitions: readonly (readonly [string, number])[],
    readonly outcome: FencedCommitOutcome,
  ) {
    super(
      `claiming ${partitions.map(([t, p]) => `${t}[${p}]`).join(', ')} did not land: ${
        outcome.kind === 'refused'
          ? outcome.error instanceof Error
            ? outcome.error.message
            : String(outcome.error)
          : outcome.kind
      }`,
    );
    this.name = 'ClaimError';
  }
}

/**
 * The claim protocol (DESIGN.md, "Offsets, rebalances, crashes": "Ambiguous commits", "Every join claims anew"): for every assigned partition,
 * read its committed offset and chain, append (owner, epoch, committed offset), and
 * commit that offset with the new chain. Only a claim that landed lets the epoch
 * stage records of the partition; its start is where the previous epoch's rows end.
 */
export async function claimPartitions(
  partitions: readonly (readonly [string, number])[],
  owner: string,
  epoch: number,
  io: ClaimIo,
): Promise<PartitionClaim[]> {
  if (partitions.length === 0) return [];
  const claims: PartitionClaim[] = [];
  const outcome = await io.commitTurn(async (send) => {
    const committed = await io.committed(partitions);
    // Asked after the committed offsets: a topic recreated in between is seen as recreated.
    const ids = io.topicIds
      ? await io.topicIds([...new Set(partitions.map(([t]) => t))])
      : new Map<string, string>();
    for (const [i, [topic, partition]] of partitions.entries()) {
      const entry = committed[i];
      const topicId = ids.get(topic);
      let chain = decodeChain(entry?.metadata);
      let offset = entry?.offset ?? -1;
      const previousTopicId = chain.at(-1)?.topicId;
      // Kafka deletes a deleted topic's committed offsets, but a commit can land after
      // the deletion (a replica still running), and offset metadata is all that records
      // which incarnation an offset counts: one of another incarnation would skip the
      // new one's records below it, and its chain's epochs staged the old one's rows.
      // Both are dropped; the new incarnation is consumed from its log start (records
      // written to it before this claim are never skipped, whatever fromBeginning says).
      let recreated = false;
      if (topicId !== undefined && previousTopicId !== undefined && previousTopicId !== topicId) {
        recreated = true;
        chain = [];
        const start = io.logStart ? await io.logStart(topic, partition) : 0;
        io.recreated?.({ topic, partition, topicId, previousTopicId, droppedOffset: offset, start });
        offset = start;
      }
      // A retry of a claim whose first commit landed unanswered finds its own entry:
      // it keeps it as it is (appending it again would give the epoch an empty range).
      const own = chain.find((e) => e.owner === owner && e.epoch === epoch);
      if (own) {
        claims.push({ topic, partition, start: own.start as CommitOffset, chain, topicId });
        continue;
      }
      const start = offset >= 0 || recreated ? offset : await io.initialOffset(topic, partition);
      claims.push({
        topic,
        partition,
        start: start as CommitOffset,
        chain: appendEpoch(
          chain,
          topicId === undefined ? { owner, epoch, start } : { owner, epoch, start, topicId },
        ),
        topicId,
      });
    }
    await send(
      claims.map((c) => ({
        topic: c.topic,
        partition: c.partition,
        offset: c.start,
        metadata: encodeChain(c.chain),
      })),
    );
  });
  if (outcome.kind !== 'landed') throw new ClaimError(partitions, outcome);
  return claims;
}
