import type { Generation, GroupMembership } from './membership';

/** What the coordinator was asked to do for one OffsetCommit attempt. */
export interface CommitAttempt {
  readonly groupId: string;
  readonly memberId: string;
  readonly groupGenerationId: number;
  /** kafkajs's own commits (a default offset after OFFSET_OUT_OF_RANGE) carry no metadata; ours always do. */
  readonly topics?: readonly { readonly partitions: readonly { readonly metadata?: string | null }[] }[];
}

/** The outcome of one fenced commit: only `landed` means the broker stored it. */
export type FencedCommitOutcome =
  | { readonly kind: 'landed' }
  /** kafkajs returned without an OffsetCommit answered (its runner was not running). */
  | { readonly kind: 'not-sent' }
  | { readonly kind: 'refused'; readonly error: unknown };

/** Thrown into kafkajs's retry loop: a retry that would land in another generation. Not retriable. */
export class CommitFencedError extends Error {
  /** kafkajs's retrier gives up on errors with retriable === false. */
  readonly retriable = false;
  constructor(
    readonly decidedIn: Generation,
    readonly attempt: CommitAttempt,
  ) {
    super(
      `commit decided in generation ${decidedIn.generationId} (member ${decidedIn.memberId}) refused before sending: ` +
        `the attempt would go out in generation ${attempt.groupGenerationId} (member ${attempt.memberId})`,
    );
    this.name = 'CommitFencedError';
  }
}

/**
 * Thrown into kafkajs: an OffsetCommit kafkajs decided itself (a default offset after
 * OFFSET_OUT_OF_RANGE) carries no ownership chain, so landing it would erase the chain
 * and move the partition's commit where no staged record stands. Not retriable.
 */
export class ChainlessCommitRefusedError extends Error {
  readonly retriable = false;
  constructor(readonly attempt: CommitAttempt) {
    super(
      `an offset commit without the ownership chain (generation ${attempt.groupGenerationId}) was refused: ` +
        'only commits decided by kafka-lance may land',
    );
    this.name = 'ChainlessCommitRefusedError';
  }
}

interface InFlight {
  readonly decidedIn: Generation;
  answered: boolean;
}

/**
 * Offsets (and the ownership chain in their metadata) may only be committed in the
 * generation in which the commit was decided. kafkajs retries a failed commit for up
 * to ~30 s inside `consumer.commitOffsets`, and a retry after a rejoin goes out with
 * the new generation, where the partition may belong to another member that has
 * claimed it meanwhile: the late commit would overwrite that member's offset and
 * chain. So every OffsetCommit attempt passes `check` (called by the coordinator
 * hook just before the request leaves) and is refused unless it carries the member
 * and generation the commit was decided in, and that is still our current one.
 *
 * Commits run one at a time, so the attempt in flight is unambiguous; the fence also
 * records whether an attempt was really answered (kafkajs returns without sending
 * while its runner restarts).
 */
export class CommitFence {
  readonly #membership: GroupMembership;
  readonly #groupId: string;
  #inFlight: InFlight | undefined;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(membership: GroupMembership, groupId: string) {
    this.#membership = membership;
    this.#groupId = groupId;
  }

  /** Runs `send` (one kafkajs commitOffsets call) fenced to `decidedIn`, after every earlier commit settled. */
  commit(decidedIn: Generation, send: () => Promise<unknown>): Promise<FencedCommitOutcome> {
    const run = async (): Promise<FencedCommitOutcome> => {
      if (!this.#membership.isCurrent(decidedIn)) {
        return {
          kind: 'refused',
          error: new Error('a newer group join superseded this commit before it was sent'),
        };
      }
      const inFlight: InFlight = { decidedIn, answered: false };
      this.#inFlight = inFlight;
      try {
        await send();
        return inFlight.answered ? { kind: 'landed' } : { kind: 'not-sent' };
      } catch (error) {
        return { kind: 'refused', error };
      } finally {
        this.#inFlight = undefined;
      }
    };
    const result = this.#queue.then(run, run);
    this.#queue = result;
    return result;
  }

  /** Called for every OffsetCommit attempt of this consumer, just before it is sent; throws to refuse it. */
  check(attempt: CommitAttempt): void {
    if (attempt.groupId !== this.#groupId) return;
    const f = this.#inFlight;
    // kafkajs's own commits (a default offset after OFFSET_OUT_OF_RANGE, which the fetch
    // hook now answers itself) never land: they carry no chain and no staged position.
    if (f === undefined || !carriesMetadata(attempt)) throw new ChainlessCommitRefusedError(attempt);
    const decidedIn = f.decidedIn;
    if (
      !this.#membership.isCurrent(decidedIn) ||
      attempt.memberId !== decidedIn.memberId ||
      attempt.groupGenerationId !== decidedIn.generationId
    ) {
      throw new CommitFencedError(decidedIn, attempt);
    }
  }

  /** Called when an OffsetCommit attempt was answered without error. */
  answered(attempt: CommitAttempt): void {
    if (attempt.groupId !== this.#groupId || !carriesMetadata(attempt)) return;
    if (this.#inFlight) this.#inFlight.answered = true;
  }
}

/** Whether the attempt is one of ours: every kafka-lance commit carries the ownership chain. */
function carriesMetadata(attempt: CommitAttempt): boolean {
  // Without the topics (a caller that does not pass them) it cannot be told apart: count it.
  if (!attempt.topics) return true;
  return attempt.topics.some((t) => t.partitions.some((p) => typeof p.metadata === 'string'));
}
