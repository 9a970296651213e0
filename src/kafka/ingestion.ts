import type { Admin, Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import type { CommitOffset, DurableOffset } from '../common/offsets';
import type { ResolvedConsumer } from '../config';
import type { BatchDone, PartitionOffset } from '../pool/protocol';
import type { Metrics } from '../metrics/metrics';
import type { StagingPool } from '../pool/staging-pool';
import type { StagingEpoch } from '../staging/epoch';
import type { DeadLetterSink } from './dead-letter';
import { DeadLetterOutbox } from './dead-letter-outbox';
import { OffsetTracker, type PartitionCommit } from './offset-tracker';
import { appendEpoch, decodeChain, encodeChain, type OwnershipEpoch } from './ownership';

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
  /** Test-only: SIGKILL this process when the Nth data commit is answered, before it is recorded. */
  readonly killAtCommit?: number;
}

export interface IngestionStats {
  readonly consumedRecords: number;
  readonly consumedBytes: number;
  readonly deadLetters: number;
  readonly commits: number;
  readonly refusedCommits: number;
  readonly joins: number;
}

/**
 * The consumer group side of a replica: fetches with kafkajs, hands batches to the
 * staging pool (waiting for queue room: that wait is the backpressure), and on each
 * durability tick commits what staging reports durable, for the partitions it owns.
 *
 * Ownership (DESIGN.md, "Offsets, rebalances, crashes"): on every join the
 * revoked partitions stop being tracked at once (no commit for them can be issued
 * after the join), and each newly assigned partition gets this replica's epoch
 * appended to the chain in its offset metadata, committed before its first batch is
 * staged.
 */
export class Ingestion {
  readonly #o: IngestionOptions;
  readonly #consumer: Consumer;
  readonly #tracker = new OffsetTracker();
  readonly #outbox: DeadLetterOutbox;
  #assignment = new Set<string>();
  #assignmentReady: Promise<void> = Promise.resolve();
  #epoch: number;
  #ready = false;
  #stopping = false;
  #tickTimer: NodeJS.Timeout | undefined;
  #ticking: Promise<void> = Promise.resolve();
  readonly #inFlight = new Set<Promise<unknown>>();
  #dataCommits = 0;
  #fatal: ((error: Error) => void) | undefined;
  readonly #stats = {
    consumedRecords: 0,
    consumedBytes: 0,
    commits: 0,
    refusedCommits: 0,
    joins: 0,
  };

  constructor(options: IngestionOptions) {
    this.#o = options;
    this.#epoch = options.initialEpoch;
    this.#consumer = options.kafka.consumer({
      groupId: options.consumer.groupId,
      sessionTimeout: options.consumer.sessionTimeoutMs,
      rebalanceTimeout: options.consumer.rebalanceTimeoutMs,
      heartbeatInterval: options.consumer.heartbeatIntervalMs,
      maxBytesPerPartition: 4 * 1024 * 1024,
      allowAutoTopicCreation: false,
    });
    this.#outbox = new DeadLetterOutbox({
      sink: options.deadLetters,
      errors: options.consumer.errors,
      logger: options.logger,
      metrics: options.metrics,
      pause: (topic, partition) => this.#consumer.pause([{ topic, partitions: [partition] }]),
      hold: (topic, partition, offset) => this.#tracker.addPendingDeadLetters(topic, partition, [offset]),
      resolved: (topic, partition, offsets) => this.#tracker.resolveDeadLetters(topic, partition, offsets),
    });
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
    const topics = [
      ...new Set([...this.#assignment].map((k) => JSON.parse(k) as [string, number]).map(([t]) => t)),
    ];
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
    log('left the group');
  }

  #onJoin(memberAssignment: Record<string, number[]>): void {
    this.#stats.joins += 1;
    const next = new Set<string>();
    for (const [topic, partitions] of Object.entries(memberAssignment)) {
      for (const p of partitions) next.add(JSON.stringify([topic, p]));
    }
    const revoked: PartitionOffset[] = [];
    // Synchronously, before any await: no commit for a lost partition may start after the join.
    for (const key of this.#assignment) {
      if (next.has(key)) continue;
      const [topic, partition] = JSON.parse(key) as [string, number];
      const ceiling = this.#tracker.revoke(topic, partition);
      this.#o.metrics.committedOffset.remove({ topic, partition: String(partition) });
      this.#o.metrics.consumerLag.remove({ topic, partition: String(partition) });
      if (ceiling !== undefined) revoked.push([topic, partition, (ceiling as number) - 1]);
    }
    const gained = [...next]
      .filter((k) => !this.#assignment.has(k))
      .map((k) => JSON.parse(k) as [string, number]);
    this.#assignment = next;
    // kafkajs keeps pauses across rebalances (bugs #1376, #1641); we pause only to stop,
    // the replica or a partition the dead-letter outbox stopped (it stays stopped).
    if (!this.#stopping) {
      const paused = this.#outbox.resumable(this.#consumer.paused());
      if (paused.length > 0) this.#consumer.resume(paused);
    }
    this.#epoch += 1;
    const epoch: StagingEpoch = { owner: this.#o.owner, epoch: this.#epoch };
    const previous = this.#assignmentReady;
    this.#assignmentReady = (async () => {
      await previous.catch(() => undefined);
      const assigned = await this.#claimPartitions(gained, epoch.epoch);
      await this.#o.pool.beginEpoch(epoch, revoked, assigned);
      this.#ready = true;
      this.#o.logger.info(
        {
          event: 'kafka.join',
          epoch: epoch.epoch,
          assigned: [...next].map((k) => JSON.parse(k) as unknown),
          gained: assigned.map(([t, p, o]) => ({ topic: t, partition: p, start: o + 1 })),
          revoked: revoked.map(([t, p, o]) => ({ topic: t, partition: p, ceiling: o + 1 })),
        },
        'joined the consumer group',
      );
    })();
    this.#assignmentReady.catch((error: unknown) => {
      // A stale generation: kafkajs rejoins and a later join sets things up again.
      this.#o.logger.warn({ event: 'kafka.join.failed', err: error }, 'could not set up the assignment');
    });
  }

  /**
   * For each gained partition: read its committed offset and ownership chain, append
   * this replica's epoch, and commit the start offset with the new chain. Returns the
   * high-water for staging (start - 1) of each partition whose commit landed.
   */
  async #claimPartitions(gained: readonly [string, number][], epoch: number): Promise<PartitionOffset[]> {
    if (gained.length === 0) return [];
    const topics = [...new Set(gained.map(([t]) => t))];
    const committed = await this.#o.admin.fetchOffsets({ groupId: this.#o.consumer.groupId, topics });
    const commits: PartitionCommit[] = [];
    const chains = new Map<string, OwnershipEpoch[]>();
    for (const [topic, partition] of gained) {
      const entry = committed
        .find((t) => t.topic === topic)
        ?.partitions.find((p) => p.partition === partition);
      let start = entry ? Number(entry.offset) : -1;
      if (start < 0) start = await this.#initialOffset(topic, partition);
      const chain = appendEpoch(decodeChain(entry?.metadata), { owner: this.#o.owner, epoch, start });
      commits.push({ topic, partition, offset: start as CommitOffset, metadata: encodeChain(chain) });
      chains.set(`${topic}:${partition}`, chain);
    }
    // Must land before the first batch is staged: if it does not, this generation is
    // stale, kafkajs rejoins, and a later join claims the partitions again.
    await this.#send(commits);
    for (const c of commits) {
      this.#tracker.assign(c.topic, c.partition, c.offset, chains.get(`${c.topic}:${c.partition}`)!);
      this.#o.metrics.committedOffset.set({ topic: c.topic, partition: String(c.partition) }, c.offset);
    }
    return commits.map((c) => [c.topic, c.partition, (c.offset as number) - 1] as const);
  }

  async #initialOffset(topic: string, partition: number): Promise<number> {
    const offsets = await this.#o.admin.fetchTopicOffsets(topic);
    const p = offsets.find((o) => o.partition === partition);
    return Number(this.#o.consumer.fromBeginning ? (p?.low ?? 0) : (p?.high ?? 0));
  }

  async #eachBatch(payload: EachBatchPayload): Promise<void> {
    const { batch } = payload;
    const heartbeat = () => payload.heartbeat();
    await this.#whileHeartbeating(this.#assignmentReady, heartbeat);
    const { topic, partition } = batch;
    if (
      this.#stopping ||
      !payload.isRunning() ||
      payload.isStale() ||
      !this.#tracker.owns(topic, partition) ||
      this.#outbox.isStopped(topic, partition)
    )
      return;
    const messages = batch.messages;
    const last = messages[messages.length - 1];
    if (!last) return;
    const { done } = await this.#whileHeartbeating(this.#o.pool.admit(topic, partition, messages), heartbeat);
    // Only the fetch position: with autoCommit off, kafkajs never commits what is resolved.
    payload.resolveOffset(last.offset);
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

  #scheduleTick(): void {
    if (this.#stopping) return;
    this.#tickTimer = setTimeout(() => {
      this.#ticking = this.#tick()
        .catch((error: unknown) => this.#fatal?.(error instanceof Error ? error : new Error(String(error))))
        .finally(() => this.#scheduleTick());
    }, this.#o.consumer.durabilityIntervalMs);
  }

  /** One durability tick: sync staging, commit what became durable, seal due parts. */
  async #tick(): Promise<void> {
    const endTimer = this.#o.metrics.durableSync.startTimer();
    const durable = await this.#o.pool.sync();
    endTimer();
    for (const [topic, partition, offset] of durable) {
      this.#tracker.noteDurable(topic, partition, offset as DurableOffset);
    }
    await this.#commit(this.#tracker.commitsDue());
    await this.#o.pool.flush(false);
  }

  async #commit(commits: readonly PartitionCommit[]): Promise<void> {
    if (commits.length === 0) return;
    try {
      await this.#send(commits);
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
    } catch (error) {
      // A refused commit (rebalance, stale generation) did not land; it is never
      // retried into a generation that no longer owns the partition: the next tick
      // recomputes commits from the current assignment.
      this.#stats.refusedCommits += 1;
      this.#o.logger.warn(
        { event: 'kafka.commit.refused', err: errorMessage(error) },
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
