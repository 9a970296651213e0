import type { Consumer } from 'kafkajs';
import { withTimeout } from '../common/time-limit';
import { DeadLetterOutbox } from '../dead-letters/dead-letter-outbox';
import { CONSUMER_RETRY, ConsumerRestart } from './consumer-restart';
import { BatchRunner } from './batch-runner';
import { createHookedConsumer } from './protocol/coordinator-hook';
import { DurabilityTick } from './durability-tick';
import { FetchPositions } from './fetch-positions';
import { fetchSizes } from './fetch-sizes';
import { IngestionMetrics } from './ingestion-events';
import { IngestionState, type IngestionOptions, type IngestionStats } from './ingestion-state';
import { pauseIfRunning, pauseTopics, resumeIfRunning } from './consumer-pauses';
import { JoinClaims } from './join-claims';
import { OffsetCommitter } from './offset-committer';
import { TopicSubscription } from './topic-subscription';

/**
 * The consumer group side of a replica: fetches with kafkajs, hands batches to the
 * staging pool (waiting for queue room: that wait is the backpressure), and on each
 * durability tick commits what staging reports durable, for the partitions it owns.
 *
 * This class wires the roles and orders their start and stop; each role has its file:
 * the claims of every group join (join-claims.ts: every join starts from scratch and
 * claims its assignment under a new staging epoch, DESIGN.md "Offsets, rebalances,
 * crashes"), the fetch positions of each claim (fetch-positions.ts), kafkajs's
 * eachBatch (batch-runner.ts), the durability tick (durability-tick.ts) and the
 * commits, each fenced to the generation it was decided in (offset-committer.ts).
 */
export class Ingestion {
  readonly #state: IngestionState;
  readonly #events: IngestionMetrics;
  readonly #consumer: Consumer;
  readonly #outbox: DeadLetterOutbox;
  readonly #positions: FetchPositions;
  readonly #committer: OffsetCommitter;
  readonly #joins: JoinClaims;
  readonly #runner: BatchRunner;
  readonly #ticks: DurabilityTick;
  readonly #restarts: ConsumerRestart;
  readonly #subscription: TopicSubscription;
  #stopping = false;
  /** The group had committed offsets when this replica started (read with topic patterns only). */
  #groupHadCommits = false;

  constructor(options: IngestionOptions) {
    const state = new IngestionState(options);
    this.#state = state;
    const events = new IngestionMetrics(options.metrics);
    this.#events = events;
    const stopping = () => this.#stopping;
    const track = (work: Promise<unknown>, ignore?: (error: unknown) => boolean) => state.track(work, ignore);
    const fail = (error: unknown) => state.fail(error);
    this.#consumer = createHookedConsumer(
      options.kafka,
      {
        groupId: options.consumer.groupId,
        sessionTimeout: options.consumer.sessionTimeoutMs,
        rebalanceTimeout: options.consumer.rebalanceTimeoutMs,
        heartbeatInterval: options.consumer.heartbeatIntervalMs,
        // kafkajs heartbeats between fetches: an idle fetch held for its default 5 s would let a
        // session shorter than that expire while the member waits for records.
        maxWaitTimeInMs: Math.min(5_000, options.consumer.heartbeatIntervalMs),
        ...fetchSizes(options.consumer.queue.maxBytes),
        allowAutoTopicCreation: false,
        // Every restart after a crash is the replica's (consumer-restart.ts).
        retry: CONSUMER_RETRY,
      },
      {
        synced: (memberId, generationId) => {
          state.membership.synced(memberId, generationId);
          options.previousMember?.joined(memberId, generationId);
        },
        beforeCommit: (attempt) => state.fence.check(attempt),
        committed: (attempt) => state.fence.answered(attempt),
        fetched: (batches) => this.#positions.onFetched(batches),
        offsetOutOfRange: (topic, partition, fetchOffset) =>
          this.#positions.onOffsetOutOfRange(topic, partition, fetchOffset),
        corruptBatch: (topic, partition, fetchOffset, error) =>
          this.#positions.onCorruptBatch(topic, partition, fetchOffset, error),
        misframedBatch: (topic, partition, batch) =>
          this.#positions.onMisframedBatch(topic, partition, batch),
      },
    );
    this.#outbox = new DeadLetterOutbox({
      sink: options.deadLetters,
      errors: options.consumer.errors,
      logger: options.logger,
      metrics: options.metrics,
      pause: (topic, partition) => void pauseIfRunning(this.#consumer, [{ topic, partitions: [partition] }]),
      hold: (topic, partition, offset) => state.tracker.holdOffsets(topic, partition, [offset]),
      resolved: (topic, partition, offsets) => state.tracker.releaseOffsets(topic, partition, offsets),
    });
    this.#subscription = new TopicSubscription({
      consumer: options.consumer,
      kafka: options.kafka,
      admin: options.admin,
      logger: options.logger,
      restart: (between) => this.#restart(between),
    });
    const { tracker, membership, fence, gate, offsets, topicIds } = state;
    const { logger, pool, diskPressure, tableDir } = options;
    const epoch = () => this.#joins.epoch;
    this.#positions = new FetchPositions(
      { epoch, stopping, tracker, diskPressure, pool, offsets, topicIds, logger, events, track },
      this.#consumer,
      this.#outbox,
    );
    this.#committer = new OffsetCommitter({ membership, fence, tracker, logger, events }, this.#consumer);
    this.#joins = new JoinClaims(
      {
        consumer: options.consumer,
        owner: options.owner,
        admin: options.admin,
        logger,
        initialEpoch: options.initialEpoch,
        pool,
        tableDir,
        diskPressure,
        tracker,
        membership,
        fence,
        gate,
        offsets,
        topicIds,
        stopping,
        fail,
        discovered: (topic) => this.#subscription.discovered(topic),
        groupHadCommits: () => this.#groupHadCommits,
        events,
      },
      this.#consumer,
      this.#outbox,
      this.#positions,
      this.#committer,
    );
    this.#runner = new BatchRunner(
      {
        epoch,
        stopping,
        heartbeatIntervalMs: options.consumer.heartbeatIntervalMs,
        pool,
        schemas: options.schemas,
        topicIds,
        logger,
        events,
        track,
      },
      this.#consumer,
      this.#outbox,
      this.#positions,
      this.#joins,
    );
    this.#ticks = new DurabilityTick(
      {
        intervalMs: options.consumer.durabilityIntervalMs,
        pool,
        tracker,
        gate,
        tableDir,
        diskPressure,
        events,
        stopping,
        fail,
      },
      this.#committer,
    );
    this.#restarts = new ConsumerRestart({
      logger: options.logger,
      metrics: options.metrics,
      restart: () => this.#run(),
      joined: () => this.#joins.ready,
      fail,
    });
    // A full disk pauses fetching (nothing is dropped: unfetched records stay in Kafka,
    // admitted ones wait in their writers) and the ticks go on retrying the writes.
    options.diskPressure.onChange((full) => {
      if (this.#stopping) return;
      if (full)
        pauseTopics(
          this.#consumer,
          state.tracker.assigned().map((a) => a.topic),
        );
      else resumeIfRunning(this.#consumer, this.#outbox.resumable(this.#consumer.paused()));
    });
  }

  /** True once the consumer joined its group and its assignment is set up. */
  get ready(): boolean {
    return this.#joins.ready;
  }

  get stats(): IngestionStats {
    return { ...this.#events.counts, deadLetters: this.#outbox.delivered };
  }

  /** Partitions owned now, with their last landed commit. */
  owned(): { topic: string; partition: number; landed: number }[] {
    return this.#state.tracker.assigned();
  }

  async start(onFatal: (error: Error) => void): Promise<void> {
    this.#state.onFatal(onFatal);
    const o = this.#state.options;
    const c = o.consumer;
    this.#consumer.on(this.#consumer.events.GROUP_JOIN, (event) => {
      this.#restarts.onJoin();
      this.#joins.onJoin(event.payload.memberAssignment);
    });
    this.#consumer.on(this.#consumer.events.CRASH, (event) => {
      const error = event.payload.error;
      // kafkajs's `restart` is always false here (restartOnFailure): not logged, as it
      // would read as given up. kafka.consumer.restarting says what follows.
      o.logger.error({ event: 'kafka.crash', err: error }, 'consumer crashed');
      // kafkajs restarts nothing itself: what may pass is started again by the replica
      // (consumer-restart.ts); refused credentials at start stop it, which the CLI reports
      // with exit code 2. A stop under way ends the consumer anyway.
      if (this.#stopping) return;
      if (this.#restarts.onCrash(error)) return;
      onFatal(error);
    });
    await this.#consumer.connect();
    if (c.topicPatterns.length === 0) {
      await this.#consumer.subscribe({ topics: c.topics!, fromBeginning: c.fromBeginning });
    } else {
      // Read before this replica's first claim can commit: a pattern-matched topic without
      // commits in a group that has some is read from its start (initial-position.ts).
      this.#groupHadCommits = await this.#state.offsets.groupHasCommits();
      await this.#subscription.subscribe(this.#consumer);
    }
    await this.#run();
    this.#ticks.schedule();
    this.#subscription.schedule();
  }

  /**
   * Stops kafkajs's consumer (it leaves the group), runs `between` (a new subscription),
   * and runs it again: it joins, and the join claims its assignment as every join does.
   */
  async #restart(between: (consumer: Consumer) => Promise<void>): Promise<void> {
    if (this.#stopping) return;
    // A consumer restart under way first joins: stopped while joining, its runner would
    // fetch on (a stop meanwhile goes first: it bounds its own wait). One only scheduled,
    // or scheduled by that join failing, is this restart's to make.
    await Promise.race([this.#restarts.settled(), this.#restarts.stopped]);
    if (this.#stopping) return;
    this.#restarts.cancelScheduled();
    await this.#consumer.stop();
    try {
      await between(this.#consumer);
    } finally {
      if (!this.#stopping) await this.#run();
    }
  }

  #run(): Promise<void> {
    return this.#consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 1,
      eachBatch: (payload) => this.#runner.eachBatch(payload),
    });
  }

  /**
   * Graceful stop: stop fetching, let admitted batches finish, make everything
   * durable, commit it, seal every part, leave the group.
   */
  async stop(): Promise<void> {
    const s = this.#state;
    if (this.#stopping) return;
    this.#stopping = true;
    this.#restarts.stop();
    // A subscription change under way ends first (it does not run the consumer again once stopping).
    await this.#subscription.stop();
    const log = (step: string) => s.options.logger.info({ event: 'ingestion.stop', step }, `stop: ${step}`);
    const topics = s.tracker.assigned().map((a) => a.topic);
    if (!pauseTopics(this.#consumer, topics))
      log('the consumer is between a crash and its restart: nothing to pause');
    // A dead-letter write retrying (a DLQ that is down) must not hold the stop.
    this.#outbox.close();
    await this.#ticks.stopTicking();
    await s.settled();
    log('fetching stopped, admitted batches staged');
    await this.#ticks.tick();
    log('durable and committed');
    const sealed = await s.options.pool.close();
    log(`sealed ${sealed.parts} parts`);
    // A consumer restart under way joins first: disconnected while joining, its runner would
    // fetch on without a member that leaves. Not for longer than STOP_JOIN_WAIT_MS: the
    // process exits after the stop, which ends such a runner too.
    await withTimeout(this.#restarts.settled(), STOP_JOIN_WAIT_MS, 'join under way').catch(() => undefined);
    await this.#consumer.disconnect();
    await s.topicIds.close();
    s.options.schemas?.close();
    log('left the group');
  }
}

/** How long a graceful stop waits for a consumer restart's join under way. */
const STOP_JOIN_WAIT_MS = 10_000;
