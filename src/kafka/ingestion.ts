import type { Admin, Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import { DiskFullError, errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import { tpKey, type DurableOffset, type TopicPartitionKey } from '../common/offsets';
import type { ResolvedConsumer } from '../config';
import type { BatchDone, DurableReport, PartitionOffset } from '../pool/protocol';
import type { Metrics } from '../metrics/metrics';
import { StagingPoolClosedError, type StagingPool } from '../pool/staging-pool';
import type { StagingEpoch } from '../staging/epoch';
import { claimPartitions, type PartitionClaim } from '../ownership/claim';
import { CommitFence } from '../ownership/commit-fence';
import { GroupMembership, type Generation } from '../ownership/membership';
import { OffsetTracker, type PartitionCommit } from '../ownership/offset-tracker';
import { PublicationGate } from '../ownership/publication-gate';
import { listPartIds } from '../staging/part-ids';
import { createHookedConsumer } from './coordinator-hook';
import { isGroupChange, rejoinRequest } from './kafka-errors';
import { coveredThrough, type FetchedBatch } from './fetched-batch';
import { PartitionOffsets, type LogBounds } from './partition-offsets';
import type { DeadLetterSink } from '../dead-letters/dead-letter';
import type { DiskPressure } from './disk-pressure';
import { DeadLetterOutbox } from '../dead-letters/dead-letter-outbox';
import { TopicIds, topicIdsOf } from './topic-ids';
import type { SchemaSource } from '../schema-registry/schema-source';

export interface IngestionOptions {
  readonly consumer: ResolvedConsumer;
  readonly kafka: Kafka;
  readonly admin: Admin;
  readonly pool: StagingPool;
  readonly deadLetters: DeadLetterSink;
  /** This process instance: the owner recorded in parts and in the ownership chain. */
  readonly owner: string;
  readonly logger: Logger;
  /** The epoch the pool's staging starts in (before the first join). */
  readonly initialEpoch: number;
  readonly metrics: Metrics;
  /** The table's staging directory ('published' commits wait for its parts to be published). */
  readonly tableDir: string;
  /** Full disks of this process: consumption pauses while any is full. */
  readonly diskPressure: DiskPressure;
  /** Registry formats: fetches the writer schemas of each batch before it goes to staging. */
  readonly schemas?: SchemaSource;
  /** Test-only: SIGKILL this process when the Nth data commit is answered, before it is recorded. */
  readonly killAtCommit?: number;
}

export interface IngestionStats {
  readonly consumedRecords: number;
  readonly consumedBytes: number;
  readonly deadLetters: number;
  readonly commits: number;
  readonly refusedCommits: number;
  /** Commits kafkajs returned from without sending (its runner was restarting): retried at the next tick. */
  readonly unsentCommits: number;
  readonly joins: number;
}

/**
 * The consumer group side of a replica: fetches with kafkajs, hands batches to the
 * staging pool (waiting for queue room: that wait is the backpressure), and on each
 * durability tick commits what staging reports durable, for the partitions it owns.
 *
 * Ownership (DESIGN.md, "Offsets, rebalances, crashes"; the rules live in
 * src/ownership/): every join starts from scratch. At once, before any await, every
 * partition stops being tracked, so no commit can be decided for it; then each
 * assigned partition is claimed under the new staging epoch (its chain gets this
 * epoch appended, committed at the committed offset), the staging high-water is set
 * to the claim's start and kafkajs is sought there. A claim superseded by a newer
 * join is dropped; a claim that fails is retried while its join is current. Every
 * commit is fenced to the generation it was decided in.
 */
export class Ingestion {
  readonly #o: IngestionOptions;
  readonly #consumer: Consumer;
  readonly #tracker = new OffsetTracker();
  /** offsets.commitAfter 'published': holds each commit until the parts below it are published. */
  readonly #gate: PublicationGate | undefined;
  /**
   * Per partition, the offset the next batch must have been fetched from in the
   * current epoch: the claim's start, then just after the last admitted batch. A
   * batch fetched elsewhere (queued by another broker's fetcher before the claim) is
   * never staged: staging takes a batch as covering everything below its last offset.
   */
  readonly #positions = new Map<TopicPartitionKey, { epoch: number; next: number }>();
  readonly #outbox: DeadLetterOutbox;
  readonly #membership = new GroupMembership();
  readonly #fence: CommitFence;
  readonly #offsets: PartitionOffsets;
  /** Positions beyond the log end already reported (once each). */
  readonly #aheadOfLogLogged = new Set<string>();
  /** Topic incarnations (Kafka topic ids): claimed with each partition, stamped on its rows. */
  readonly #topicIds: TopicIds;
  #assignmentReady: Promise<void> = Promise.resolve();
  #epoch: number;
  #ready = false;
  #stopping = false;
  #tickTimer: NodeJS.Timeout | undefined;
  #ticking: Promise<void> = Promise.resolve();
  readonly #inFlight = new Set<Promise<unknown>>();
  #dataCommits = 0;
  #fatal: ((error: Error) => void) | undefined;
  /** Wait before the next tick while staging's disk is full (0: the usual interval). */
  #diskBackoffMs = 0;
  readonly #stats = {
    consumedRecords: 0,
    consumedBytes: 0,
    commits: 0,
    refusedCommits: 0,
    unsentCommits: 0,
    joins: 0,
  };

  constructor(options: IngestionOptions) {
    this.#o = options;
    this.#epoch = options.initialEpoch;
    this.#gate = options.consumer.offsets.commitAfter === 'published' ? new PublicationGate() : undefined;
    this.#fence = new CommitFence(this.#membership, options.consumer.groupId);
    this.#offsets = new PartitionOffsets(options.kafka, options.admin, options.consumer.groupId);
    this.#topicIds = new TopicIds(options.kafka, options.logger);
    this.#consumer = createHookedConsumer(
      options.kafka,
      {
        groupId: options.consumer.groupId,
        sessionTimeout: options.consumer.sessionTimeoutMs,
        rebalanceTimeout: options.consumer.rebalanceTimeoutMs,
        heartbeatInterval: options.consumer.heartbeatIntervalMs,
        maxBytesPerPartition: 4 * 1024 * 1024,
        allowAutoTopicCreation: false,
      },
      {
        synced: (memberId, generationId) => this.#membership.synced(memberId, generationId),
        beforeCommit: (attempt) => this.#fence.check(attempt),
        committed: (attempt) => this.#fence.answered(attempt),
        fetched: (batches) => this.#onFetched(batches),
        offsetOutOfRange: (topic, partition, fetchOffset) =>
          this.#onOffsetOutOfRange(topic, partition, fetchOffset),
      },
    );
    this.#outbox = new DeadLetterOutbox({
      sink: options.deadLetters,
      errors: options.consumer.errors,
      logger: options.logger,
      metrics: options.metrics,
      pause: (topic, partition) => this.#consumer.pause([{ topic, partitions: [partition] }]),
      hold: (topic, partition, offset) => this.#tracker.addPendingDeadLetters(topic, partition, [offset]),
      resolved: (topic, partition, offsets) => this.#tracker.resolveDeadLetters(topic, partition, offsets),
    });
    // A full disk pauses fetching (nothing is dropped: unfetched records stay in Kafka,
    // admitted ones wait in their writers) and the ticks go on retrying the writes.
    options.diskPressure.onChange((full) => {
      if (this.#stopping) return;
      if (full) this.#pauseTopics(this.#tracker.assigned().map((a) => a.topic));
      else this.#consumer.resume(this.#outbox.resumable(this.#consumer.paused()));
    });
  }

  #pauseTopics(topics: readonly string[]): void {
    const unique = [...new Set(topics)];
    if (unique.length > 0) this.#consumer.pause(unique.map((topic) => ({ topic })));
  }

  /** True once the consumer joined its group and its assignment is set up. */
  get ready(): boolean {
    return this.#ready;
  }

  get stats(): IngestionStats {
    return { ...this.#stats, deadLetters: this.#outbox.delivered };
  }

  /** Partitions owned now, with their last landed commit. */
  owned(): { topic: string; partition: number; landed: number }[] {
    return this.#tracker.assigned();
  }

  /** The batches' DLQ results (pool hook): registered synchronously, before a sync covering them. */
  onBatchDone(topic: string, partition: number, result: BatchDone): void {
    const table = { table: this.#o.consumer.table };
    this.#o.metrics.stagedRecords.inc(table, result.staged);
    this.#o.metrics.stagedBytes.inc(table, result.stagedBytes);
    if (result.deadLetters.length > 0) {
      this.#tracker.addPendingDeadLetters(
        topic,
        partition,
        result.deadLetters.map((d) => d.offset),
      );
    }
  }

  async start(onFatal: (error: Error) => void): Promise<void> {
    this.#fatal = onFatal;
    const c = this.#o.consumer;
    this.#consumer.on(this.#consumer.events.GROUP_JOIN, (event) => {
      this.#onJoin(event.payload.memberAssignment);
    });
    this.#consumer.on(this.#consumer.events.CRASH, (event) => {
      const error = event.payload.error;
      this.#o.logger.error(
        { event: 'kafka.crash', err: error, restart: event.payload.restart },
        'consumer crashed',
      );
      if (!event.payload.restart) onFatal(error);
    });
    await this.#consumer.connect();
    await this.#consumer.subscribe({
      topics: c.topics ?? [new RegExp(c.topicsRegex!)],
      fromBeginning: c.fromBeginning,
    });
    await this.#consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 1,
      eachBatch: (payload) => this.#eachBatch(payload),
    });
    this.#scheduleTick();
  }

  /**
   * Graceful stop: stop fetching, let admitted batches finish, make everything
   * durable, commit it, seal every part, leave the group.
   */
  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    if (this.#tickTimer) clearTimeout(this.#tickTimer);
    const topics = [...new Set(this.#tracker.assigned().map((a) => a.topic))];
    if (topics.length > 0) this.#consumer.pause(topics.map((topic) => ({ topic })));
    const log = (step: string) => this.#o.logger.info({ event: 'ingestion.stop', step }, `stop: ${step}`);
    // A dead-letter write retrying (a DLQ that is down) must not hold the stop.
    this.#outbox.close();
    await this.#ticking;
    await Promise.allSettled([...this.#inFlight]);
    log('fetching stopped, admitted batches staged');
    await this.#tick();
    log('durable and committed');
    const sealed = await this.#o.pool.close();
    log(`sealed ${sealed.parts} parts`);
    await this.#consumer.disconnect();
    await this.#topicIds.close();
    this.#o.schemas?.close();
    log('left the group');
  }

  #onJoin(memberAssignment: Record<string, number[]>): void {
    this.#stats.joins += 1;
    const generation = this.#membership.joined();
    const assigned: [string, number][] = [];
    for (const [topic, partitions] of Object.entries(memberAssignment)) {
      for (const p of partitions) assigned.push([topic, p]);
    }
    // Synchronously, before any await: no commit may be decided for any partition
    // until this join's claim has landed, kept partitions included (another member
    // may have owned and committed them while this one missed a generation).
    const revoked: PartitionOffset[] = [];
    this.#gate?.close();
    for (const { topic, partition } of this.#tracker.assigned()) {
      const landed = this.#tracker.revoke(topic, partition);
      this.#o.metrics.committedOffset.remove({ topic, partition: String(partition) });
      this.#o.metrics.consumerLag.remove({ topic, partition: String(partition) });
      this.#o.metrics.offsetsAheadOfLog.remove({ topic, partition: String(partition) });
      if (landed !== undefined) revoked.push([topic, partition, (landed as number) - 1]);
    }
    // kafkajs keeps pauses across rebalances (bugs #1376, #1641); we pause only to stop,
    // the replica or a partition the dead-letter outbox stopped (it stays stopped).
    if (this.#o.diskPressure.full) this.#pauseTopics(assigned.map(([topic]) => topic));
    else if (!this.#stopping) {
      const paused = this.#outbox.resumable(this.#consumer.paused());
      if (paused.length > 0) this.#consumer.resume(paused);
    }
    this.#epoch += 1;
    const epoch: StagingEpoch = { owner: this.#o.owner, epoch: this.#epoch };
    const previous = this.#assignmentReady;
    this.#assignmentReady = (async () => {
      await previous.catch(() => undefined);
      const claims = await this.#claimWhileCurrent(generation, assigned, epoch.epoch);
      // Superseded (or stopping): the newer join claims, and resets the high-water of, whatever it is assigned.
      if (claims === undefined || this.#stopping || !this.#membership.isCurrent(generation)) return;
      for (const c of claims) {
        this.#tracker.assign(c.topic, c.partition, c.start, c.chain, epoch.epoch);
        this.#positions.set(tpKey(c.topic, c.partition), { epoch: epoch.epoch, next: c.start });
        this.#o.metrics.committedOffset.set({ topic: c.topic, partition: String(c.partition) }, c.start);
        // A claim starts from the commit anew: a position beyond the log end is the new claim's
        // to find. Both series exist from the claim on (alerts and dashboards see 0, not nothing).
        this.#o.metrics.offsetsAheadOfLog.set({ topic: c.topic, partition: String(c.partition) }, 0);
        this.#o.metrics.offsetsLost.inc({ topic: c.topic, partition: String(c.partition) }, 0);
      }
      const assignedOffsets = claims.map((c) => [c.topic, c.partition, (c.start as number) - 1] as const);
      // A full disk fails the seal of the old epoch's parts: wait for space (the epoch
      // request is idempotent), never fail the replica over it.
      for (let attempt = 0; ; attempt++) {
        try {
          await this.#o.pool.beginEpoch({ ...epoch, topicIds: topicIdsOf(claims) }, revoked, assignedOffsets);
          break;
        } catch (error) {
          if (!(error instanceof DiskFullError)) throw error;
          this.#o.diskPressure.reportFull('staging', { path: error.path, operation: error.operation });
          if (this.#stopping || !this.#membership.isCurrent(generation)) return;
          await new Promise((r) => setTimeout(r, Math.min(5_000, 250 * 2 ** attempt)));
        }
      }
      if (!this.#membership.isCurrent(generation)) return; // a newer join seeks for itself
      if (this.#gate) {
        // Every part on disk now is of an older epoch (beginEpoch sealed them; nothing of
        // this epoch is staged before the claim is ready): none holds this epoch's commits.
        const older = await listPartIds(this.#o.tableDir);
        if (!this.#membership.isCurrent(generation)) return;
        this.#gate.open(older);
      }
      // Consume from exactly the claimed start: a batch fetched before the claim is stale.
      try {
        for (const c of claims) {
          // The position, not the start: a gap found since the claim was set moved it.
          const next = this.#positions.get(tpKey(c.topic, c.partition))?.next ?? c.start;
          this.#consumer.seek({ topic: c.topic, partition: c.partition, offset: String(next) });
        }
      } catch (error) {
        // kafkajs is restarting (its consumer group is gone): the rejoin that follows claims again.
        this.#o.logger.warn({ event: 'kafka.seek.failed', err: errorMessage(error) }, 'could not seek');
        return;
      }
      this.#ready = true;
      this.#o.logger.info(
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
          revoked: revoked.map(([t, p, o]) => ({ topic: t, partition: p, landed: o + 1 })),
        },
        'joined the consumer group',
      );
    })();
    this.#assignmentReady.catch((error: unknown) => {
      this.#fatal?.(error instanceof Error ? error : new Error(String(error)));
    });
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
    for (let attempt = 0; ; attempt++) {
      if (this.#stopping || !this.#membership.isCurrent(generation)) return undefined;
      try {
        const claims = await claimPartitions(partitions, this.#o.owner, epoch, {
          committed: (tps) => this.#readCommitted(tps),
          initialOffset: (topic, partition) => this.#initialOffset(topic, partition),
          ...this.#topicIds.claimIo(this.#o.admin),
          commitTurn: (claim) =>
            this.#fence.commit(generation, () => claim((commits) => this.#send(commits))),
        });
        return this.#membership.isCurrent(generation) ? claims : undefined;
      } catch (error) {
        if (!this.#membership.isCurrent(generation)) return undefined;
        this.#o.logger.warn(
          { event: 'kafka.claim.failed', attempt, epoch, err: errorMessage(error) },
          'could not claim the assigned partitions; retrying',
        );
        await new Promise((r) => setTimeout(r, Math.min(5_000, 200 * 2 ** attempt)));
      }
    }
  }

  #readCommitted(partitions: readonly (readonly [string, number])[]) {
    return this.#offsets.committed(partitions);
  }

  async #initialOffset(topic: string, partition: number): Promise<number> {
    const [bounds] = await this.#offsets.bounds([[topic, partition]]);
    return this.#o.consumer.fromBeginning ? bounds!.low : bounds!.high;
  }

  /**
   * The position this epoch expects the next fetch of a partition from, if the
   * partition is being consumed now (claimed in the current epoch, not paused).
   */
  #consuming(topic: string, partition: number): { epoch: number; next: number } | undefined {
    const position = this.#positions.get(tpKey(topic, partition));
    if (
      !position ||
      position.epoch !== this.#epoch ||
      this.#stopping ||
      !this.#tracker.owns(topic, partition) ||
      this.#outbox.isStopped(topic, partition) ||
      this.#o.diskPressure.full
    )
      return undefined;
    return position;
  }

  /**
   * Moves a partition past offsets that hold nothing to consume, through `through`:
   * the position follows, kafkajs is sought there, and an empty batch through the
   * partition's staging worker (after every batch admitted before it) lets the commit
   * pass the gap even when no record follows it (a transaction marker at the log end).
   */
  #skipGap(
    topic: string,
    partition: number,
    position: { epoch: number; next: number },
    through: number,
  ): void {
    position.next = through + 1;
    this.#consumer.seek({ topic, partition, offset: String(through + 1) });
    const admitted = this.#o.pool
      .admit(topic, partition, [], position.epoch, through)
      .then(({ done }) => done);
    this.#inFlight.add(admitted);
    void admitted
      .catch((error: unknown) => {
        // A graceful stop closed the pool: the gap is found again by the next owner.
        if (error instanceof StagingPoolClosedError) return;
        this.#fatal?.(error instanceof Error ? error : new Error(String(error)));
      })
      .finally(() => this.#inFlight.delete(admitted));
  }

  /**
   * Every fetch answer, before kafkajs hands its batches out. A batch with nothing
   * deliverable (aborted records, transaction markers, the tail of a record batch whose
   * records were compacted away) never reaches eachBatch: kafkajs moves its own position past it
   * (one offset per fetch for a compacted tail), and ours would stay behind and seek
   * back forever. Such a batch, fetched from where this epoch expects, moves the
   * position past everything it covers.
   */
  #onFetched(batches: readonly FetchedBatch[]): void {
    for (const batch of batches) {
      if (!batch.isEmpty()) continue;
      const through = coveredThrough(batch);
      const position = this.#consuming(batch.topic, batch.partition);
      if (through === undefined || !position || position.next !== Number(batch.fetchedOffset)) continue;
      this.#skipGap(batch.topic, batch.partition, position, through);
    }
  }

  /**
   * The broker has no offset `fetchOffset` in the partition any more (retention or
   * deleteRecords moved the log start past it) or not yet (the log was truncated below
   * it). kafkajs would reset the position and commit a default offset without the
   * ownership chain; instead the position moves to the log start, and the offsets that
   * were gone before anyone read them are counted and named once.
   */
  async #onOffsetOutOfRange(topic: string, partition: number, fetchOffset: number): Promise<void> {
    // A topic deleted and recreated under its name is out of range at the old position:
    // once the topic-id watch has seen it, rejoin (thrown out of the fetch, kafkajs
    // rejoins on the error's type) so that the next claim takes the new incarnation.
    this.#topicIds.assertCurrent(topic);
    let bounds: LogBounds | undefined;
    try {
      // Bounded: this runs inside the fetch of every partition the broker leads.
      [bounds] = await withTimeout(this.#offsets.bounds([[topic, partition]]), 5_000);
    } catch (error) {
      this.#o.logger.warn(
        { event: 'kafka.offsets.bounds-failed', topic, partition, err: errorMessage(error) },
        'could not read the log bounds of a partition whose position is out of range; retrying',
      );
      return this.#hold(topic, partition, 1_000);
    }
    const position = this.#consuming(topic, partition);
    if (!position) return this.#hold(topic, partition, 1_000); // not ours to move now: a claim seeks it
    if (position.next !== fetchOffset) {
      // A fetch from a stale position: the epoch's own position is where to go.
      this.#consumer.seek({ topic, partition, offset: String(position.next) });
      return;
    }
    const { low, high } = bounds!;
    if (fetchOffset < low) {
      const lost = low - fetchOffset;
      this.#o.metrics.offsetsLost.inc({ topic, partition: String(partition) }, lost);
      this.#o.logger.warn(
        {
          event: 'kafka.offsets.lost',
          topic,
          partition,
          from: fetchOffset,
          to: low - 1,
          count: lost,
          low,
          high,
        },
        `offsets ${fetchOffset}-${low - 1} of ${topic}[${partition}] were removed from the log (retention or deleteRecords) before this group read them; consuming from ${low}`,
      );
      this.#skipGap(topic, partition, position, low - 1);
      return;
    }
    // Beyond the log end: the log was truncated below what this group consumed (an
    // unclean leader election). Records written at those offsets now are other records
    // than the staged ones, under offsets already published: the partition waits (the
    // others go on) and is tried again every few seconds, shown meanwhile.
    this.#o.metrics.offsetsAheadOfLog.set({ topic, partition: String(partition) }, fetchOffset - high);
    const key = `${tpKey(topic, partition)}@${fetchOffset}`;
    if (!this.#aheadOfLogLogged.has(key)) {
      this.#aheadOfLogLogged.add(key);
      // A warning: a topic being recreated passes through here for a moment (until the
      // topic-id watch rejoins); a truncated log stays here, and its alert fires.
      this.#o.logger.warn(
        { event: 'kafka.offsets.ahead-of-log', topic, partition, position: fetchOffset, low, high },
        `the position ${fetchOffset} of ${topic}[${partition}] is beyond its log end ${high} (the log was truncated, or the topic is being recreated); the partition waits`,
      );
    }
    this.#hold(topic, partition, 5_000);
  }

  /**
   * Pauses one partition for a while: its fetch keeps failing (kafkajs fails the whole
   * fetch of a broker for one partition out of range), so it must leave the fetch for the
   * other partitions of that broker to go on. Resumed after `ms` unless something else
   * holds it (the dead-letter outbox, a full disk, a stop); a join resumes it anyway.
   */
  #hold(topic: string, partition: number, ms: number): void {
    this.#consumer.pause([{ topic, partitions: [partition] }]);
    setTimeout(() => {
      if (this.#stopping || this.#o.diskPressure.full || this.#outbox.isStopped(topic, partition)) return;
      this.#consumer.resume([{ topic, partitions: [partition] }]);
    }, ms).unref();
  }

  async #eachBatch(payload: EachBatchPayload): Promise<void> {
    const { batch } = payload;
    const heartbeat = () => payload.heartbeat();
    await this.#untilClaimed(heartbeat);
    // A topic recreated since its claim: rejoin (the error's type), so that the next claim takes the new incarnation.
    this.#topicIds.assertCurrent(batch.topic);
    const { topic, partition } = batch;
    // Not consumed now (stopping, not owned, paused by the outbox or a full disk, or not
    // claimed in this epoch): not admitted, refetched from the claim's position later.
    // Staging drops the batch if a join begins a new epoch before it gets there: its
    // fetch position belongs to the old claim (see StagingPool.admit).
    const position = this.#consuming(topic, partition);
    if (!payload.isRunning() || payload.isStale() || !position) return;
    const epoch = position.epoch;
    const messages = batch.messages;
    const last = messages[messages.length - 1];
    const fetched = batch as unknown as FetchedBatch;
    const through = coveredThrough(fetched);
    if (!last || through === undefined) return;
    const fetchedFrom = Number(fetched.fetchedOffset);
    if (fetchedFrom !== position.next) {
      // Fetched from another position than this epoch expects (queued before the
      // claim's seek): refetch from ours.
      this.#o.logger.info(
        { event: 'kafka.position.refetch', topic, partition, fetchedFrom, expected: position.next },
        'batch fetched from another position than the claim expects; refetching',
      );
      this.#consumer.seek({ topic, partition, offset: String(position.next) });
      return;
    }
    const schemas = await this.#o.schemas?.forBatch(messages, {
      heartbeat: () =>
        heartbeat().catch((error: unknown) => {
          // A group change leaves eachBatch so that kafkajs rejoins; others are the next heartbeat's to tell.
          if (isGroupChange(error)) throw error;
        }),
      wanted: () => payload.isRunning() && !payload.isStale() && this.#epoch === epoch && !this.#stopping,
      heartbeatIntervalMs: this.#o.consumer.heartbeatIntervalMs,
    });
    // Given up while the registry was unreachable: nothing admitted, the batch is fetched again.
    if (this.#o.schemas && schemas === undefined) return;
    let done: Promise<BatchDone>;
    try {
      ({ done } = await this.#whileHeartbeating(
        this.#o.pool.admit(topic, partition, messages, epoch, through, schemas),
        heartbeat,
      ));
    } catch (error) {
      // A graceful stop closed the pool while this batch waited for room: nothing of it
      // was staged, and leaving it unresolved and uncommitted lets Kafka redeliver it.
      if (error instanceof StagingPoolClosedError) return;
      throw error;
    }
    // A join during admit: staging drops the batch, and kafkajs's new position is the claim's.
    if (this.#epoch !== epoch) return;
    // Past everything the fetch covered, not just its last delivered record: the offsets
    // after it may hold nothing deliverable (compacted away, aborted, a marker).
    position.next = through + 1;
    // Only the fetch position: with autoCommit off, kafkajs never commits what is resolved.
    payload.resolveOffset(String(through));
    let bytes = 0;
    for (const m of messages) bytes += (m.value?.byteLength ?? 0) + (m.key?.byteLength ?? 0);
    this.#stats.consumedRecords += messages.length;
    this.#stats.consumedBytes += bytes;
    this.#o.metrics.consumedRecords.inc({ topic }, messages.length);
    this.#o.metrics.consumedBytes.inc({ topic }, bytes);
    // The letters are copied out when the batch is staged: the write may take long, the batch must not stay.
    const tracked = done.then((result) =>
      this.#outbox.deliver(this.#outbox.take(topic, partition, messages, result.deadLetters)),
    );
    this.#inFlight.add(tracked);
    void tracked
      .catch((error: unknown) => this.#fatal?.(error instanceof Error ? error : new Error(String(error))))
      .finally(() => this.#inFlight.delete(tracked));
    await heartbeat();
  }

  /**
   * Waits for the current join's claim, heartbeating. If a heartbeat says the group
   * is rebalancing (or forgot this member), the error leaves eachBatch so that
   * kafkajs rejoins: the claim of a stale generation can never land.
   */
  async #untilClaimed(heartbeat: () => Promise<void>): Promise<void> {
    let failed: ((error: unknown) => void) | undefined;
    const heartbeatFailed = new Promise<never>((_, reject) => (failed = reject));
    heartbeatFailed.catch(() => undefined);
    const timer = setInterval(
      () =>
        void heartbeat().catch((error: unknown) => {
          if (isGroupChange(error)) failed?.(error);
        }),
      this.#o.consumer.heartbeatIntervalMs,
    );
    // A claim that cannot land for a whole session (a coordinator that moved while our
    // heartbeats still reach the old one) must not wedge the member: leave and rejoin.
    const tooLong = setTimeout(
      () => failed?.(rejoinRequest('the assignment could not be claimed within sessionTimeoutMs; rejoining')),
      this.#o.consumer.sessionTimeoutMs,
    );
    try {
      await Promise.race([this.#assignmentReady.catch(() => undefined), heartbeatFailed]);
    } finally {
      clearInterval(timer);
      clearTimeout(tooLong);
    }
  }

  #scheduleTick(): void {
    if (this.#stopping) return;
    this.#tickTimer = setTimeout(() => {
      this.#ticking = this.#tick()
        .catch((error: unknown) => this.#fatal?.(error instanceof Error ? error : new Error(String(error))))
        .finally(() => this.#scheduleTick());
    }, this.#diskBackoffMs || this.#o.consumer.durabilityIntervalMs);
  }

  /** Staging's disk is full: pause, and retry the writes at growing intervals (up to 5 s). */
  #stagingDiskFull(error: DiskFullError): void {
    const interval = this.#o.consumer.durabilityIntervalMs;
    this.#diskBackoffMs = Math.min(
      Math.max(5_000, interval),
      Math.max(interval, this.#diskBackoffMs * 2 || 250),
    );
    this.#o.diskPressure.reportFull('staging', { path: error.path, operation: error.operation });
  }

  /** One durability tick: sync staging, commit what became durable, seal due parts. */
  async #tick(): Promise<void> {
    const endTimer = this.#o.metrics.durableSync.startTimer();
    let reports: readonly DurableReport[];
    try {
      reports = await this.#o.pool.sync();
    } catch (error) {
      // Nothing new is durable this tick: nothing is committed, the writers keep their bytes.
      if (error instanceof DiskFullError) return this.#stagingDiskFull(error);
      throw error;
    }
    endTimer();
    for (const { epoch, offsets } of reports) {
      for (const [topic, partition, offset] of offsets) {
        this.#tracker.noteDurable(topic, partition, offset as DurableOffset, epoch);
      }
    }
    let commits: PartitionCommit[];
    if (this.#gate) {
      // After the sync replies: a part they report unsealed may be renamed during the listing.
      const present = new Set(reports.flatMap((r) => r.unsealed));
      for (const id of await listPartIds(this.#o.tableDir)) present.add(id);
      // Decided after the listing: a join during it closes and reopens the gate, and the
      // old epoch's commits must not enter the new epoch's gate (the tracker dropped them).
      commits = this.#tracker.stillDue(this.#gate.tick(this.#tracker.commitsDue(), present));
    } else {
      commits = this.#tracker.commitsDue();
    }
    await this.#commit(commits);
    try {
      await this.#o.pool.flush(false);
    } catch (error) {
      if (error instanceof DiskFullError) return this.#stagingDiskFull(error);
      throw error;
    }
    this.#diskBackoffMs = 0;
    this.#o.diskPressure.reportWritten('staging');
  }

  /** Commits decided now (in the current generation), fenced to it. */
  async #commit(commits: readonly PartitionCommit[]): Promise<void> {
    const generation = this.#membership.current;
    if (commits.length === 0 || !generation) return;
    const outcome = await this.#fence.commit(generation, () => this.#send(commits));
    if (outcome.kind === 'landed') {
      this.#dataCommits += 1;
      if (this.#o.killAtCommit !== undefined && this.#dataCommits >= this.#o.killAtCommit) {
        // Test-only: the answer arrived but this replica dies before it records it.
        process.kill(process.pid, 'SIGKILL');
      }
      this.#tracker.landed(commits);
      this.#stats.commits += 1;
      for (const c of commits) {
        this.#o.metrics.committedOffset.set({ topic: c.topic, partition: String(c.partition) }, c.offset);
      }
    } else if (outcome.kind === 'not-sent') {
      // kafkajs's runner was not running (a crash-restart or rejoin): nothing reached
      // the broker. The next tick recomputes the commit from what is still owned.
      this.#stats.unsentCommits += 1;
      this.#o.logger.warn({ event: 'kafka.commit.unsent' }, 'offset commit not sent (consumer restarting)');
    } else {
      // A refused commit (rebalance, stale generation, fenced) did not land; it is never
      // retried into a generation that no longer owns the partition: the next tick
      // recomputes commits from the current assignment.
      this.#stats.refusedCommits += 1;
      this.#o.logger.warn(
        { event: 'kafka.commit.refused', err: errorMessage(outcome.error) },
        'offset commit refused',
      );
    }
  }

  /** Commits exactly these offsets, each with its partition's ownership chain as metadata. */
  async #send(commits: readonly PartitionCommit[]): Promise<void> {
    await this.#consumer.commitOffsets(
      commits.map((c) => ({
        topic: c.topic,
        partition: c.partition,
        offset: String(c.offset),
        metadata: c.metadata,
      })),
    );
  }

  /** kafkajs heartbeats only from its fetch loop: keep the membership alive while we wait. */
  async #whileHeartbeating<T>(work: Promise<T>, heartbeat: () => Promise<void>): Promise<T> {
    // The timer is cleared as soon as the work settles: a pending timer would keep the
    // batch (and kafkajs's fetch buffers behind it) alive for a whole interval.
    const timer = setInterval(
      () => void heartbeat().catch(() => undefined),
      this.#o.consumer.heartbeatIntervalMs,
    );
    try {
      return await work;
    } finally {
      clearInterval(timer);
    }
  }
}

/** Rejects when `work` takes longer than `ms` (the work itself goes on, its result unused). */
function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
