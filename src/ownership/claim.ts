import type { CommitOffset } from '../common/offsets';
import { appendEpoch, decodeChain, encodeChain, type OwnershipEpoch } from './chain';
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
  /**
   * Runs `claim` as one turn of the fenced commit queue: no commit of this process can
   * land between its read of the committed offsets and its own commit.
   */
  commitTurn(
    claim: (send: (commits: readonly PartitionCommit[]) => Promise<unknown>) => Promise<unknown>,
  ): Promise<FencedCommitOutcome>;
}

export interface Claim {
  readonly topic: string;
  readonly partition: number;
  /** The first offset this epoch consumes: the committed offset when it was claimed. */
  readonly start: CommitOffset;
  readonly chain: readonly OwnershipEpoch[];
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
): Promise<Claim[]> {
  if (partitions.length === 0) return [];
  const claims: Claim[] = [];
  const outcome = await io.commitTurn(async (send) => {
    const committed = await io.committed(partitions);
    for (const [i, [topic, partition]] of partitions.entries()) {
      const entry = committed[i];
      const chain = decodeChain(entry?.metadata);
      // A retry of a claim whose first commit landed unanswered finds its own entry:
      // it keeps it as it is (appending it again would give the epoch an empty range).
      const own = chain.find((e) => e.owner === owner && e.epoch === epoch);
      if (own) {
        claims.push({ topic, partition, start: own.start as CommitOffset, chain });
        continue;
      }
      const start = entry && entry.offset >= 0 ? entry.offset : await io.initialOffset(topic, partition);
      claims.push({
        topic,
        partition,
        start: start as CommitOffset,
        chain: appendEpoch(chain, { owner, epoch, start }),
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
