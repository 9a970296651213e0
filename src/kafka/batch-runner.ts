import type { Consumer, EachBatchPayload } from 'kafkajs';
import type { Logger } from '../common/logger';
import type { DeadLetterOutbox } from '../dead-letters/dead-letter-outbox';
import type { BatchDone } from '../pool/protocol';
import { StagingPoolClosedError, type StagingPool } from '../pool/staging-pool';
import type { SchemaSource } from '../schema-registry/schema-source';
import { coveredThrough, type FetchedBatch } from './protocol/fetched-batch';
import type { FetchPositions } from './fetch-positions';
import type { IngestionEvents } from './ingestion-events';
import type { JoinClaims } from './join-claims';
import { isGroupChange } from './protocol/kafka-errors';
import type { TopicIds } from './protocol/topic-ids';

/** What the batch runner works with. */
export interface BatchRunnerDeps {
  /** The staging epoch of the current join. */
  readonly epoch: () => number;
  readonly stopping: () => boolean;
  readonly heartbeatIntervalMs: number;
  readonly pool: Pick<StagingPool, 'admit'>;
  /** Registry formats: the writer schemas of each batch, fetched before it goes to staging. */
  readonly schemas: Pick<SchemaSource, 'forBatch'> | undefined;
  readonly topicIds: Pick<TopicIds, 'assertCurrent'>;
  readonly logger: Logger;
  readonly events: Pick<IngestionEvents, 'consumed'>;
  /** Work that runs on after its batch left eachBatch: a stop waits for it, its failure is fatal. */
  readonly track: (work: Promise<unknown>) => void;
}

/**
 * kafkajs's eachBatch: waits for the join's claim, admits each batch fetched from its
 * partition's expected position into the staging pool (waiting for queue room: that
 * wait is the backpressure, heartbeating meanwhile), moves the position past it and
 * hands its dead letters to the outbox once staged.
 */
export class BatchRunner {
  readonly #deps: BatchRunnerDeps;
  readonly #consumer: Pick<Consumer, 'seek'>;
  readonly #outbox: Pick<DeadLetterOutbox, 'take' | 'deliver'>;
  readonly #positions: Pick<FetchPositions, 'consuming'>;
  readonly #joins: Pick<JoinClaims, 'untilClaimed'>;

  constructor(
    deps: BatchRunnerDeps,
    consumer: Pick<Consumer, 'seek'>,
    outbox: Pick<DeadLetterOutbox, 'take' | 'deliver'>,
    positions: Pick<FetchPositions, 'consuming'>,
    joins: Pick<JoinClaims, 'untilClaimed'>,
  ) {
    this.#deps = deps;
    this.#consumer = consumer;
    this.#outbox = outbox;
    this.#positions = positions;
    this.#joins = joins;
  }

  async eachBatch(payload: EachBatchPayload): Promise<void> {
    const s = this.#deps;
    const { batch } = payload;
    const heartbeat = () => payload.heartbeat();
    await this.#joins.untilClaimed(heartbeat);
    // A topic recreated since its claim: rejoin (the error's type), so that the next claim takes the new incarnation.
    s.topicIds.assertCurrent(batch.topic);
    const { topic, partition } = batch;
    // Not consumed now (stopping, not owned, paused by the outbox or a full disk, or not
    // claimed in this epoch): not admitted, refetched from the claim's position later.
    // Staging drops the batch if a join begins a new epoch before it gets there: its
    // fetch position belongs to the old claim (see StagingPool.admit).
    const position = this.#positions.consuming(topic, partition);
    if (!payload.isRunning() || payload.isStale() || !position) return;
    const epoch = position.epoch;
    let messages = batch.messages;
    const last = messages[messages.length - 1];
    const fetched = batch as unknown as FetchedBatch;
    let through = coveredThrough(fetched);
    if (!last || through === undefined) return;
    const fetchedFrom = Number(fetched.fetchedOffset);
    if (fetchedFrom !== position.next) {
      // Fetched from another position than this epoch expects (queued before the
      // claim's seek): refetch from ours.
      s.logger.info(
        { event: 'kafka.position.refetch', topic, partition, fetchedFrom, expected: position.next },
        'batch fetched from another position than the claim expects; refetching',
      );
      this.#consumer.seek({ topic, partition, offset: String(position.next) });
      return;
    }
    const forBatch = await s.schemas?.forBatch(messages, {
      heartbeat: () =>
        heartbeat().catch((error: unknown) => {
          // A group change leaves eachBatch so that kafkajs rejoins; others are the next heartbeat's to tell.
          if (isGroupChange(error)) throw error;
        }),
      wanted: () => payload.isRunning() && !payload.isStale() && s.epoch() === epoch && !s.stopping(),
      heartbeatIntervalMs: s.heartbeatIntervalMs,
    });
    // Given up while the registry was asked: nothing admitted, the batch is fetched again.
    if (s.schemas && forBatch === undefined) return;
    const schemas = forBatch?.schemas;
    // Too many distinct schema ids for one batch: only the prefix whose ids were resolved
    // is admitted, and the rest is fetched again from right after it (see MAX_SCHEMA_IDS_PER_BATCH).
    const partial = forBatch !== undefined && forBatch.admitted < messages.length;
    if (partial) {
      messages = messages.slice(0, forBatch.admitted);
      through = Number(messages[messages.length - 1]!.offset);
    }
    let done: Promise<BatchDone>;
    try {
      ({ done } = await this.#whileHeartbeating(
        s.pool.admit(topic, partition, messages, epoch, through, schemas),
        heartbeat,
      ));
    } catch (error) {
      // A graceful stop closed the pool while this batch waited for room: nothing of it
      // was staged, and leaving it unresolved and uncommitted lets Kafka redeliver it.
      if (error instanceof StagingPoolClosedError) return;
      throw error;
    }
    // A join during admit: staging drops the batch, and kafkajs's new position is the claim's.
    if (s.epoch() !== epoch) return;
    // Past everything the fetch covered, not just its last delivered record: the offsets
    // after it may hold nothing deliverable (compacted away, aborted, a marker).
    position.next = through + 1;
    // Only the fetch position: with autoCommit off, kafkajs never commits what is resolved.
    payload.resolveOffset(String(through));
    if (partial) this.#consumer.seek({ topic, partition, offset: String(through + 1) });
    let bytes = 0;
    for (const m of messages) bytes += (m.value?.byteLength ?? 0) + (m.key?.byteLength ?? 0);
    s.events.consumed(topic, messages.length, bytes);
    // The letters are copied out when the batch is staged: the write may take long, the batch must not stay.
    s.track(
      done.then((result) =>
        this.#outbox.deliver(this.#outbox.take(topic, partition, messages, result.deadLetters)),
      ),
    );
    await heartbeat();
  }

  /** kafkajs heartbeats only from its fetch loop: keep the membership alive while we wait. */
  async #whileHeartbeating<T>(work: Promise<T>, heartbeat: () => Promise<void>): Promise<T> {
    // The timer is cleared as soon as the work settles: a pending timer would keep the
    // batch (and kafkajs's fetch buffers behind it) alive for a whole interval.
    const timer = setInterval(() => void heartbeat().catch(() => undefined), this.#deps.heartbeatIntervalMs);
    try {
      return await work;
    } finally {
      clearInterval(timer);
    }
  }
}
