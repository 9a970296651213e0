import type { Consumer } from 'kafkajs';
import type { DiskPressure } from '../common/disk-pressure';
import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import { tpKey, type TopicPartitionKey } from '../common/offsets';
import { withTimeout } from '../common/time-limit';
import type { DeadLetterOutbox } from '../dead-letters/dead-letter-outbox';
import type { OffsetTracker } from '../ownership/offset-tracker';
import { StagingPoolClosedError, type StagingPool } from '../pool/staging-pool';
import { pauseIfRunning, resumeIfRunning } from './consumer-pauses';
import type { CorruptCompressedBatchError, MisframedBatch } from './protocol/compression';
import { coveredThrough, type FetchedBatch } from './protocol/fetched-batch';
import type { TopicIds } from './protocol/topic-ids';
import type { IngestionEvents } from './ingestion-events';
import type { LogBounds, PartitionOffsets } from './partition-offsets';

const MISFRAMED_LOG_INTERVAL_MS = 60_000;

/** Where the next batch of a partition must have been fetched from, in one epoch. */
export interface FetchPosition {
  readonly epoch: number;
  next: number;
}

/** What the fetch positions work with. */
export interface FetchPositionsDeps {
  /** The staging epoch of the current join. */
  readonly epoch: () => number;
  readonly stopping: () => boolean;
  readonly tracker: Pick<OffsetTracker, 'owns'>;
  readonly diskPressure: Pick<DiskPressure, 'full'>;
  /** Where an empty batch moves staging past a gap. */
  readonly pool: Pick<StagingPool, 'admit'>;
  readonly offsets: Pick<PartitionOffsets, 'bounds'>;
  readonly topicIds: Pick<TopicIds, 'assertCurrent'>;
  readonly logger: Logger;
  readonly events: Pick<IngestionEvents, 'offsetsLost' | 'aheadOfLog'>;
  /** Work that runs on after the fetch (a stop waits for it); `ignore` says which failures are not fatal. */
  readonly track: (work: Promise<unknown>, ignore?: (error: unknown) => boolean) => void;
}

/**
 * Per partition, the offset the next batch must have been fetched from in the
 * current epoch: the claim's start, then just after the last admitted batch. A
 * batch fetched elsewhere (queued by another broker's fetcher before the claim) is
 * never staged: staging takes a batch as covering everything below its last offset.
 *
 * Also what moves a position without a batch: offsets that hold nothing to consume
 * (a compacted tail, aborted records, transaction markers) and a position the broker
 * no longer has (retention, deleteRecords) or not yet (a truncated log).
 */
export class FetchPositions {
  readonly #deps: FetchPositionsDeps;
  readonly #consumer: Pick<Consumer, 'seek' | 'pause' | 'resume'>;
  readonly #outbox: Pick<DeadLetterOutbox, 'isStopped' | 'stop'>;
  readonly #positions = new Map<TopicPartitionKey, FetchPosition>();
  /** Positions beyond the log end already reported (once each). */
  readonly #aheadOfLogLogged = new Set<string>();
  /** Partitions whose ahead-of-log gauge is up: back to 0 once the log has caught up. */
  readonly #aheadOfLog = new Set<TopicPartitionKey>();
  /** Per partition, when a misframed batch was last said, and how many came since. */
  readonly #misframed = new Map<TopicPartitionKey, { loggedAt: number; since: number }>();

  constructor(
    deps: FetchPositionsDeps,
    consumer: Pick<Consumer, 'seek' | 'pause' | 'resume'>,
    outbox: Pick<DeadLetterOutbox, 'isStopped' | 'stop'>,
  ) {
    this.#deps = deps;
    this.#consumer = consumer;
    this.#outbox = outbox;
  }

  /** A claim of `epoch` starts the partition at `start`. */
  claimed(topic: string, partition: number, epoch: number, start: number): void {
    this.#positions.set(tpKey(topic, partition), { epoch, next: start });
    this.#aheadOfLog.delete(tpKey(topic, partition)); // the claim sets its gauge to 0
  }

  /** Where the partition's next fetch is expected, in whatever epoch set it. */
  next(topic: string, partition: number): number | undefined {
    return this.#positions.get(tpKey(topic, partition))?.next;
  }

  /**
   * The position this epoch expects the next fetch of a partition from, if the
   * partition is being consumed now (claimed in the current epoch, not paused).
   */
  consuming(topic: string, partition: number): FetchPosition | undefined {
    const s = this.#deps;
    const position = this.#positions.get(tpKey(topic, partition));
    if (
      !position ||
      position.epoch !== s.epoch() ||
      s.stopping() ||
      !s.tracker.owns(topic, partition) ||
      this.#outbox.isStopped(topic, partition) ||
      s.diskPressure.full
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
  #skipGap(topic: string, partition: number, position: FetchPosition, through: number): void {
    position.next = through + 1;
    this.#consumer.seek({ topic, partition, offset: String(through + 1) });
    const admitted = this.#deps.pool
      .admit(topic, partition, [], position.epoch, through)
      .then(({ done }) => done);
    // A graceful stop closed the pool: the gap is found again by the next owner.
    this.#deps.track(admitted, (error) => error instanceof StagingPoolClosedError);
  }

  /**
   * Every fetch answer, before kafkajs hands its batches out. A batch with nothing
   * deliverable (aborted records, transaction markers, the tail of a record batch whose
   * records were compacted away) never reaches eachBatch: kafkajs moves its own position past it
   * (one offset per fetch for a compacted tail), and ours would stay behind and seek
   * back forever. Such a batch, fetched from where this epoch expects, moves the
   * position past everything it covers.
   */
  onFetched(batches: readonly FetchedBatch[]): void {
    for (const batch of batches) {
      const position = this.consuming(batch.topic, batch.partition);
      if (!position || position.next !== Number(batch.fetchedOffset)) continue;
      // Answered from this epoch's position: it is not ahead of the log (any more).
      this.#notAheadOfLog(batch.topic, batch.partition);
      const through = batch.isEmpty() ? coveredThrough(batch) : undefined;
      if (through === undefined) continue;
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
  async onOffsetOutOfRange(topic: string, partition: number, fetchOffset: number): Promise<void> {
    const o = this.#deps;
    const { offsets, topicIds } = o;
    // A topic deleted and recreated under its name is out of range at the old position:
    // once the topic-id watch has seen it, rejoin (thrown out of the fetch, kafkajs
    // rejoins on the error's type) so that the next claim takes the new incarnation.
    topicIds.assertCurrent(topic);
    let bounds: LogBounds | undefined;
    try {
      // Bounded: this runs inside the fetch of every partition the broker leads.
      [bounds] = await withTimeout(offsets.bounds([[topic, partition]]), 5_000, 'timed out after 5000 ms');
    } catch (error) {
      o.logger.warn(
        { event: 'kafka.offsets.bounds-failed', topic, partition, err: errorMessage(error) },
        'could not read the log bounds of a partition whose position is out of range; retrying',
      );
      return this.#hold(topic, partition, 1_000);
    }
    const position = this.consuming(topic, partition);
    if (!position) return this.#hold(topic, partition, 1_000); // not ours to move now: a claim seeks it
    if (position.next !== fetchOffset) {
      // A fetch from a stale position: the epoch's own position is where to go.
      this.#consumer.seek({ topic, partition, offset: String(position.next) });
      return;
    }
    const { low, high } = bounds!;
    if (fetchOffset <= high) this.#notAheadOfLog(topic, partition);
    if (fetchOffset < low) {
      const lost = low - fetchOffset;
      o.events.offsetsLost(topic, partition, lost);
      o.logger.warn(
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
    if (fetchOffset <= high) {
      // The broker answered out of range, and the bounds read since say the position is in
      // range: the log moved between the two (a leader change, a log start or end moving).
      // Nothing is ahead of the log: no gauge, and the partition is fetched again soon.
      o.logger.info(
        { event: 'kafka.offsets.out-of-range-retried', topic, partition, position: fetchOffset, low, high },
        `the broker said ${fetchOffset} of ${topic}[${partition}] is out of range, its log bounds say it is not; fetching again`,
      );
      return this.#hold(topic, partition, 1_000);
    }
    // Beyond the log end: the log was truncated below what this group consumed (an
    // unclean leader election). Records written at those offsets now are other records
    // than the staged ones, under offsets already published: the partition waits (the
    // others go on) and is tried again every few seconds, shown meanwhile.
    o.events.aheadOfLog(topic, partition, fetchOffset - high);
    this.#aheadOfLog.add(tpKey(topic, partition));
    const key = `${tpKey(topic, partition)}@${fetchOffset}`;
    if (!this.#aheadOfLogLogged.has(key)) {
      this.#aheadOfLogLogged.add(key);
      // A warning: a topic being recreated passes through here for a moment (until the
      // topic-id watch rejoins); a truncated log stays here, and its alert fires.
      o.logger.warn(
        { event: 'kafka.offsets.ahead-of-log', topic, partition, position: fetchOffset, low, high },
        `the position ${fetchOffset} of ${topic}[${partition}] is beyond its log end ${high} (the log was truncated, or the topic is being recreated); the partition waits`,
      );
    }
    this.#hold(topic, partition, 5_000);
  }

  /**
   * A compressed batch fetched from `fetchOffset` cannot be read. It is no dead letter
   * (its records cannot be told apart) and skipping it would lose them silently, while
   * kafkajs alone would fail the broker's whole fetch forever: the partition stops here
   * (nothing from `fetchOffset` on is committed) and the others go on.
   */
  onCorruptBatch(
    topic: string,
    partition: number,
    fetchOffset: number,
    error: CorruptCompressedBatchError,
  ): void {
    const position = this.consuming(topic, partition);
    // Not ours to stop now (a claim is landing, another epoch's fetch): it is fetched again.
    if (!position) return this.#hold(topic, partition, 1_000);
    if (position.next !== fetchOffset) {
      // A fetch from a stale position: this epoch's position is where to read from.
      this.#consumer.seek({ topic, partition, offset: String(position.next) });
      return;
    }
    const next = error.offsets ? error.offsets.last + 1 : undefined;
    const move =
      next === undefined
        ? 'move the group past the batch'
        : `to skip the batch, set the group's offset of ${topic}[${partition}] to ${next}`;
    this.#outbox.stop(topic, partition, fetchOffset, 'corrupt-record-batch', {
      message: `${error.message}. Its records cannot be read by any client; ${move} (kafka-consumer-groups --reset-offsets) and restart`,
      cause: error,
      fields: {
        codec: error.codec,
        batchFirstOffset: error.offsets?.first,
        batchLastOffset: error.offsets?.last,
      },
    });
  }

  /**
   * A compressed batch whose records' lengths lie was read by its fields, as the broker
   * validated it: nothing is lost, but its producer writes batches no Java consumer reads.
   * Said once per partition a minute, with how many such batches since.
   */
  onMisframedBatch(topic: string, partition: number, batch: MisframedBatch): void {
    const key = tpKey(topic, partition);
    const seen = this.#misframed.get(key);
    const now = Date.now();
    if (seen && now - seen.loggedAt < MISFRAMED_LOG_INTERVAL_MS) {
      seen.since += 1;
      return;
    }
    this.#misframed.set(key, { loggedAt: now, since: 0 });
    this.#deps.logger.warn(
      {
        event: 'kafka.batch.misframed',
        topic,
        partition,
        codec: batch.codec,
        batchFirstOffset: batch.firstOffset,
        batchLastOffset: batch.lastOffset,
        misframedRecords: batch.misframed,
        batchesSinceLastLine: seen?.since ?? 0,
      },
      `record batch ${batch.firstOffset}-${batch.lastOffset} of ${topic}[${partition}] (${batch.codec}): ${batch.misframed} of its records' lengths are not their sizes, a producer's bug (kafkajs given a Uint8Array value writes such batches); read by their fields, as the broker validated them. Java consumers refuse these batches: fix the producer`,
    );
  }

  /** The partition's position is within its log again: its ahead-of-log gauge goes back to 0. */
  #notAheadOfLog(topic: string, partition: number): void {
    if (!this.#aheadOfLog.delete(tpKey(topic, partition))) return;
    this.#deps.events.aheadOfLog(topic, partition, 0);
  }

  /**
   * Pauses one partition for a while: its fetch keeps failing (kafkajs fails the whole
   * fetch of a broker for one partition out of range), so it must leave the fetch for the
   * other partitions of that broker to go on. Resumed after `ms` unless something else
   * holds it (the dead-letter outbox, a full disk, a stop); a join resumes it anyway.
   */
  #hold(topic: string, partition: number, ms: number): void {
    pauseIfRunning(this.#consumer, [{ topic, partitions: [partition] }]);
    setTimeout(() => {
      if (this.#deps.stopping() || this.#deps.diskPressure.full || this.#outbox.isStopped(topic, partition))
        return;
      // The consumer may have crashed meanwhile (no group until it runs again).
      resumeIfRunning(this.#consumer, [{ topic, partitions: [partition] }]);
    }, ms).unref();
  }
}
