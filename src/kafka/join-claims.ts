import type { Admin, Consumer } from 'kafkajs';
import type { DiskPressure } from '../common/disk-pressure';
import { DiskFullError, errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import type { ResolvedConsumer } from '../config';
import type { DeadLetterOutbox } from '../dead-letters/dead-letter-outbox';
import { claimPartitions, type PartitionClaim } from '../ownership/claim';
import type { CommitFence } from '../ownership/commit-fence';
import type { Generation, GroupMembership } from '../ownership/membership';
import type { OffsetTracker } from '../ownership/offset-tracker';
import type { PublicationGate } from '../ownership/publication-gate';
import type { StagingEpoch } from '../staging/epoch';
import { listPartIds } from '../staging/part-ids';
import type { PartitionOffset } from '../pool/protocol';
import type { StagingPool } from '../pool/staging-pool';
import type { FetchPositions } from './fetch-positions';
import { startsFromEarliest } from './initial-position';
import type { IngestionEvents } from './ingestion-events';
import { isGroupChange, rejoinRequest } from './protocol/kafka-errors';
import type { OffsetCommitter } from './offset-committer';
import type { PartitionOffsets } from './partition-offsets';
import { topicIdsOf, type TopicIds } from './protocol/topic-ids';
import { pauseTopics } from './consumer-pauses';

/** What the claims of a join work with. */
export interface JoinClaimsDeps {
  readonly consumer: ResolvedConsumer;
  /** This process instance: the owner recorded in parts and in the ownership chain. */
  readonly owner: string;
  readonly admin: Admin;
  readonly logger: Logger;
  /** The epoch staging starts in (before the first join). */
  readonly initialEpoch: number;
  readonly pool: Pick<StagingPool, 'beginEpoch'>;
  /** The table's staging directory (the gate's parts). */
  readonly tableDir: string;
  readonly diskPressure: Pick<DiskPressure, 'full' | 'reportFull'>;
  readonly tracker: Pick<OffsetTracker, 'assigned' | 'revoke' | 'assign'>;
  readonly membership: Pick<GroupMembership, 'joined' | 'isCurrent'>;
  readonly fence: Pick<CommitFence, 'commit'>;
  /** offsets.commitAfter 'published': closed at a join, opened once its claim is ready. */
  readonly gate: Pick<PublicationGate, 'close' | 'open'> | undefined;
  readonly offsets: Pick<PartitionOffsets, 'committed' | 'bounds'>;
  readonly topicIds: Pick<TopicIds, 'claimIo'>;
  readonly stopping: () => boolean;
  /** A claim that failed beyond retrying: the replica cannot go on. */
  readonly fail: (error: unknown) => void;
  /** Topics this replica's refreshes added while it ran (created after its start). */
  readonly discovered: (topic: string) => boolean;
  /** The group had committed offsets when this replica started (read with topic patterns only). */
  readonly groupHadCommits: () => boolean;
  readonly events: Pick<IngestionEvents, 'joined' | 'released' | 'claimed'>;
}

/**
 * What happens on every group join (DESIGN.md, "Offsets, rebalances, crashes"; the
 * rules live in src/ownership/): every join starts from scratch. At once, before any
 * await, every partition stops being tracked, so no commit can be decided for it; then
 * each assigned partition is claimed under the new staging epoch (its chain gets this
 * epoch appended, committed at the committed offset), the staging high-water is set to
 * the claim's start and kafkajs is sought there. A claim superseded by a newer join is
 * dropped; a claim that fails is retried while its join is current.
 */
export class JoinClaims {
  readonly #deps: JoinClaimsDeps;
  readonly #consumer: Pick<Consumer, 'pause' | 'paused' | 'resume' | 'seek'>;
  readonly #outbox: Pick<DeadLetterOutbox, 'resumable' | 'stoppedAmong'>;
  readonly #positions: Pick<FetchPositions, 'claimed' | 'next'>;
  readonly #committer: Pick<OffsetCommitter, 'send'>;
  #assignmentReady: Promise<void> = Promise.resolve();
  #epoch: number;
  #ready = false;

  constructor(
    deps: JoinClaimsDeps,
    consumer: Pick<Consumer, 'pause' | 'paused' | 'resume' | 'seek'>,
    outbox: Pick<DeadLetterOutbox, 'resumable' | 'stoppedAmong'>,
    positions: Pick<FetchPositions, 'claimed' | 'next'>,
    committer: Pick<OffsetCommitter, 'send'>,
  ) {
    this.#deps = deps;
    this.#epoch = deps.initialEpoch;
    this.#consumer = consumer;
    this.#outbox = outbox;
    this.#positions = positions;
    this.#committer = committer;
  }

  /** The staging epoch: bumped at every join, before its claim. */
  get epoch(): number {
    return this.#epoch;
  }

  /** True once the consumer joined its group and its assignment is set up. */
  get ready(): boolean {
    return this.#ready;
  }

  onJoin(memberAssignment: Record<string, number[]>): void {
    const s = this.#deps;
    s.events.joined();
    const generation = s.membership.joined();
    const assigned: [string, number][] = [];
    for (const [topic, partitions] of Object.entries(memberAssignment)) {
      for (const p of partitions) assigned.push([topic, p]);
    }
    // Synchronously, before any await: no commit may be decided for any partition
    // until this join's claim has landed, kept partitions included (another member
    // may have owned and committed them while this one missed a generation).
    const revoked: PartitionOffset[] = [];
    s.gate?.close();
    for (const { topic, partition } of s.tracker.assigned()) {
      const landed = s.tracker.revoke(topic, partition);
      s.events.released(topic, partition);
      if (landed !== undefined) revoked.push([topic, partition, (landed as number) - 1]);
    }
    // kafkajs keeps pauses across rebalances (bugs #1376, #1641); we pause only to stop,
    // the replica or a partition the dead-letter outbox stopped (it stays stopped).
    if (s.diskPressure.full)
      pauseTopics(
        this.#consumer,
        assigned.map(([topic]) => topic),
      );
    else if (!s.stopping()) {
      const paused = this.#outbox.resumable(this.#consumer.paused());
      if (paused.length > 0) this.#consumer.resume(paused);
    }
    pauseStopped(this.#consumer, this.#outbox, memberAssignment);
    this.#epoch += 1;
    const epoch: StagingEpoch = { owner: s.owner, epoch: this.#epoch };
    const previous = this.#assignmentReady;
    this.#assignmentReady = (async () => {
      await previous.catch(() => undefined);
      const claims = await this.#claimWhileCurrent(generation, assigned, epoch.epoch);
      // Superseded (or stopping): the newer join claims, and resets the high-water of, whatever it is assigned.
      if (claims === undefined || s.stopping() || !s.membership.isCurrent(generation)) return;
      for (const c of claims) {
        s.tracker.assign(c.topic, c.partition, c.start, c.chain, epoch.epoch);
        this.#positions.claimed(c.topic, c.partition, epoch.epoch, c.start);
        s.events.claimed(c.topic, c.partition, c.start);
      }
      const assignedOffsets = claims.map((c) => [c.topic, c.partition, (c.start as number) - 1] as const);
      // A full disk fails the seal of the old epoch's parts: wait for space (the epoch
      // request is idempotent), never fail the replica over it.
      for (let attempt = 0; ; attempt++) {
        try {
          await s.pool.beginEpoch({ ...epoch, topicIds: topicIdsOf(claims) }, revoked, assignedOffsets);
          break;
        } catch (error) {
          if (!(error instanceof DiskFullError)) throw error;
          s.diskPressure.reportFull('staging', { path: error.path, operation: error.operation });
          if (s.stopping() || !s.membership.isCurrent(generation)) return;
          await new Promise((r) => setTimeout(r, Math.min(5_000, 250 * 2 ** attempt)));
        }
      }
      if (!s.membership.isCurrent(generation)) return; // a newer join seeks for itself
      if (s.gate) {
        // Every part on disk now is of an older epoch (beginEpoch sealed them; nothing of
        // this epoch is staged before the claim is ready): none holds this epoch's commits.
        const older = await listPartIds(s.tableDir);
        if (!s.membership.isCurrent(generation)) return;
        s.gate.open(older);
      }
      // Consume from exactly the claimed start: a batch fetched before the claim is stale.
      try {
        for (const c of claims) {
          // The position, not the start: a gap found since the claim was set moved it.
          const next = this.#positions.next(c.topic, c.partition) ?? c.start;
          this.#consumer.seek({ topic: c.topic, partition: c.partition, offset: String(next) });
        }
      } catch (error) {
        // kafkajs is restarting (its consumer group is gone): the rejoin that follows claims again.
        s.logger.warn({ event: 'kafka.seek.failed', err: errorMessage(error) }, 'could not seek');
        return;
      }
      this.#ready = true;
      s.logger.info(
        {
          event: 'kafka.join',
          epoch: epoch.epoch,
          generation: generation.generationId,
          assigned: assigned,
          claimed: claims.map((c) => ({
            topic: c.topic,
            partition: c.partition,
            start: c.start,
            topicId: c.topicId,
          })),
          revoked: revoked.map(([t, p, off]) => ({ topic: t, partition: p, landed: off + 1 })),
        },
        'joined the consumer group',
      );
    })();
    this.#assignmentReady.catch((error: unknown) => s.fail(error));
  }

  /**
   * Claims the assignment of one join, retrying a claim that did not land (a refused
   * commit, an unreachable coordinator) as long as that join is the current one.
   * Undefined when a newer join superseded it: its claim, even if it landed, is dropped.
   */
  async #claimWhileCurrent(
    generation: Generation,
    partitions: readonly [string, number][],
    epoch: number,
  ): Promise<PartitionClaim[] | undefined> {
    const s = this.#deps;
    for (let attempt = 0; ; attempt++) {
      if (s.stopping() || !s.membership.isCurrent(generation)) return undefined;
      try {
        const claims = await claimPartitions(partitions, s.owner, epoch, {
          committed: (tps) => s.offsets.committed(tps),
          initialOffset: (topic, partition) => this.#initialOffset(topic, partition),
          ...s.topicIds.claimIo(s.admin),
          commitTurn: (claim) =>
            s.fence.commit(generation, () => claim((commits) => this.#committer.send(commits))),
        });
        return s.membership.isCurrent(generation) ? claims : undefined;
      } catch (error) {
        if (!s.membership.isCurrent(generation)) return undefined;
        s.logger.warn(
          { event: 'kafka.claim.failed', attempt, epoch, err: errorMessage(error) },
          'could not claim the assigned partitions; retrying',
        );
        await new Promise((r) => setTimeout(r, Math.min(5_000, 200 * 2 ** attempt)));
      }
    }
  }

  async #initialOffset(topic: string, partition: number): Promise<number> {
    const [bounds] = await this.#deps.offsets.bounds([[topic, partition]]);
    const s = this.#deps;
    const rule = {
      consumer: s.consumer,
      groupHadCommits: s.groupHadCommits(),
      discovered: s.discovered,
    };
    return startsFromEarliest(rule, topic) ? bounds!.low : bounds!.high;
  }

  /**
   * Waits for the current join's claim, heartbeating. If a heartbeat says the group
   * is rebalancing (or forgot this member), the error leaves eachBatch so that
   * kafkajs rejoins: the claim of a stale generation can never land.
   */
  async untilClaimed(heartbeat: () => Promise<void>): Promise<void> {
    let failed: ((error: unknown) => void) | undefined;
    const heartbeatFailed = new Promise<never>((_, reject) => (failed = reject));
    heartbeatFailed.catch(() => undefined);
    const timer = setInterval(
      () =>
        void heartbeat().catch((error: unknown) => {
          if (isGroupChange(error)) failed?.(error);
        }),
      this.#deps.consumer.heartbeatIntervalMs,
    );
    // A claim that cannot land for a whole session (a coordinator that moved while our
    // heartbeats still reach the old one) must not wedge the member: leave and rejoin.
    const tooLong = setTimeout(
      () => failed?.(rejoinRequest('the assignment could not be claimed within sessionTimeoutMs; rejoining')),
      this.#deps.consumer.sessionTimeoutMs,
    );
    try {
      await Promise.race([this.#assignmentReady.catch(() => undefined), heartbeatFailed]);
    } finally {
      clearInterval(timer);
      clearTimeout(tooLong);
    }
  }
}

/**
 * Pauses the assigned partitions the dead-letter outbox stopped. kafkajs keeps pauses
 * across rebalances but not across a restart after a crash (consumer-restart.ts: a fresh
 * subscription state): without this, a restart would fetch a stopped partition again.
 */
export function pauseStopped(
  consumer: Pick<Consumer, 'pause'>,
  outbox: Pick<DeadLetterOutbox, 'stoppedAmong'>,
  assignment: Readonly<Record<string, readonly number[]>>,
): void {
  const stopped = outbox.stoppedAmong(assignment);
  if (stopped.length > 0) consumer.pause(stopped);
}
