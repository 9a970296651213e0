import type { IHeaders, KafkaMessage } from 'kafkajs';
import {
  DeadLetterWriteError,
  PartitionStoppedError,
  errorMessage,
  type PartitionStopReason,
} from '../common/errors';
import type { Logger } from '../common/logger';
import { tpKey, type TopicPartitionKey } from '../common/offsets';
import { offsetNumberOf } from '../common/fetched-record';
import type { ResolvedConsumer } from '../config';
import type { DeadLetterVerdict } from './dead-letter-reason';
import type { Metrics } from '../metrics/metrics';
import type { DeadLetter, DeadLetterSink } from './dead-letter';
import { DeadLetterWindow, type RatioExceeded } from './dead-letter-window';

export type ErrorHandling = ResolvedConsumer['errors'];

export interface DeadLetterOutboxOptions {
  readonly sink: DeadLetterSink;
  readonly errors: ErrorHandling;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** Stops fetching a partition (kafkajs `pause`). */
  readonly pause: (topic: string, partition: number) => void;
  /** Holds a partition's commits below `offset` for as long as this process owns it. */
  readonly hold: (topic: string, partition: number, offset: number) => void;
  /** These dead letters are durable: their offsets no longer hold commits back. */
  readonly resolved: (topic: string, partition: number, offsets: readonly number[]) => void;
  /** After close(), how long a write already under way may still finish. */
  readonly closeGraceMs?: number;
  /** First wait between two attempts of a transient failure (doubling up to errors.retryDelayMaxMs). */
  readonly retryDelayMs?: number;
}

/** The dead letters of one batch, copied out of kafkajs's fetch buffers. */
export interface OutgoingLetters {
  readonly topic: string;
  readonly partition: number;
  readonly letters: readonly DeadLetter[];
}

export interface TopicPartitions {
  readonly topic: string;
  readonly partitions: number[];
}

type WriteOutcome = { readonly ok: true } | { readonly ok: false; readonly error: unknown } | 'closed';

/**
 * Writes each batch's dead letters to the sink, and stops a partition that cannot go
 * on without losing or silently swallowing records:
 * - a dead letter that cannot be written (at once for errors no retry can fix, after
 *   `errors.retryTimeoutMs` for transient ones);
 * - too many dead letters (`errors.tolerance`), as a definition that matches nothing.
 * A stopped partition is paused and its commits held below the first record it did
 * not handle, until this process ends; a restart tries again. Only copies of the
 * letters are kept (never the kafkajs batch), and close() ends every wait.
 */
export class DeadLetterOutbox {
  readonly #o: DeadLetterOutboxOptions;
  readonly #stopped = new Map<TopicPartitionKey, PartitionStoppedError>();
  readonly #windows = new Map<TopicPartitionKey, DeadLetterWindow>();
  /** The first records of every partition whose window is still filling, judged together (DeadLetterWindow). */
  #replicaWindow: DeadLetterWindow | undefined;
  /** Per partition, deliveries run one after the other: the DLQ keeps the source order. */
  readonly #chains = new Map<TopicPartitionKey, Promise<void>>();
  /** Aborted by close(): retry waits end. */
  readonly #closing = new AbortController();
  /** Aborted closeGraceMs after close(): writes under way are given up on. */
  readonly #closed = new AbortController();
  #delivered = 0;

  constructor(options: DeadLetterOutboxOptions) {
    this.#o = options;
  }

  /** Dead letters made durable so far. */
  get delivered(): number {
    return this.#delivered;
  }

  isStopped(topic: string, partition: number): boolean {
    return this.#stopped.has(tpKey(topic, partition));
  }

  /** The stops of this process, for reports. */
  stops(): PartitionStoppedError[] {
    return [...this.#stopped.values()];
  }

  /**
   * Of the paused partitions, those a join may resume: kafkajs keeps pauses across
   * rebalances, and a stopped partition must stay stopped in this process.
   */
  resumable(paused: readonly TopicPartitions[]): TopicPartitions[] {
    return paused
      .map(({ topic, partitions }) => ({
        topic,
        partitions: partitions.filter((p) => !this.isStopped(topic, p)),
      }))
      .filter((t) => t.partitions.length > 0);
  }

  /**
   * Of an assignment, the partitions this process stopped: every join pauses them again,
   * since a consumer restart after a crash (src/kafka/consumer-restart.ts) builds its subscription state
   * anew and forgets every pause.
   */
  stoppedAmong(assignment: Readonly<Record<string, readonly number[]>>): TopicPartitions[] {
    return Object.entries(assignment)
      .map(([topic, partitions]) => ({
        topic,
        partitions: partitions.filter((p) => this.isStopped(topic, p)),
      }))
      .filter((t) => t.partitions.length > 0);
  }

  /**
   * Synchronously, when a batch is staged: judges it against `errors.tolerance` and
   * copies its dead letters out of `messages`, so that the caller can let go of the
   * kafkajs batch (its buffers) before the write. Undefined: nothing to write.
   */
  take(
    topic: string,
    partition: number,
    messages: readonly KafkaMessage[],
    verdicts: readonly DeadLetterVerdict[],
  ): OutgoingLetters | undefined {
    // A stopped partition's later letters stay pending in the tracker: commits stay held.
    if (this.isStopped(topic, partition)) return undefined;
    const byOffset = new Map(verdicts.map((v) => [v.offset, v]));
    const exceeded = this.#window(topic, partition)?.record(messages.map(offsetNumberOf), byOffset);
    if (exceeded) {
      this.#stopForRatio(topic, partition, exceeded);
      return undefined;
    }
    if (verdicts.length === 0) return undefined;
    const messageAt = new Map(messages.map((m) => [offsetNumberOf(m), m]));
    const letters = verdicts.map((v): DeadLetter => {
      const m = messageAt.get(v.offset)!;
      return {
        topic,
        partition,
        offset: v.offset,
        timestamp: m.timestamp,
        reason: v.reason,
        detail: v.detail,
        // Copies: a slice would keep the whole fetch response alive.
        key: m.key ? Buffer.from(m.key) : null,
        value: m.value ? Buffer.from(m.value) : null,
        headers: copyHeaders(m.headers),
      };
    });
    return { topic, partition, letters };
  }

  /**
   * Writes the letters after the partition's earlier ones. Resolves once they are
   * durable, or their partition stopped, or close() gave up on them; never rejects.
   * Letters not written keep holding back their partition's commits.
   */
  deliver(outgoing: OutgoingLetters | undefined): Promise<void> {
    if (!outgoing) return Promise.resolve();
    const key = tpKey(outgoing.topic, outgoing.partition);
    const next = (this.#chains.get(key) ?? Promise.resolve()).then(() => this.#deliver(outgoing));
    this.#chains.set(key, next);
    void next.finally(() => {
      if (this.#chains.get(key) === next) this.#chains.delete(key);
    });
    return next;
  }

  /**
   * No more retries; writes under way get `closeGraceMs` to finish. What is not
   * written stays uncommitted, and a restart handles it again.
   */
  close(): void {
    if (this.#closing.signal.aborted) return;
    this.#closing.abort();
    setTimeout(() => this.#closed.abort(), this.#o.closeGraceMs ?? 2_000).unref();
  }

  async #deliver({ topic, partition, letters }: OutgoingLetters): Promise<void> {
    const { sink, errors, logger } = this.#o;
    const started = Date.now();
    for (let attempt = 0; ; attempt++) {
      if (this.isStopped(topic, partition) || this.#closed.signal.aborted) return;
      // Retried after close(): the process is stopping; the letters stay uncommitted.
      if (attempt > 0 && this.#closing.signal.aborted) return;
      const outcome = await this.#untilClosed(sink.write(letters));
      if (outcome === 'closed') return;
      if (outcome.ok) {
        this.#written(topic, partition, letters);
        return;
      }
      const error =
        outcome.error instanceof DeadLetterWriteError
          ? outcome.error
          : new DeadLetterWriteError(sink.description, errorMessage(outcome.error), {
              retriable: true,
              cause: outcome.error,
            });
      const elapsed = Date.now() - started;
      if (!error.retriable || elapsed >= errors.retryTimeoutMs) {
        const why = error.retriable ? `still failing after ${Math.round(elapsed / 1000)} s of retries: ` : '';
        this.stop(topic, partition, letters[0]!.offset, 'dead-letter-write-failed', {
          message: `${letters.length} dead letter(s) could not be written to ${sink.description}: ${why}${error.detail}`,
          cause: error,
          fields: { sink: sink.description, cause: error.detail, attempts: attempt + 1 },
        });
        return;
      }
      if (this.#closing.signal.aborted) {
        logger.warn(
          {
            event: 'dead-letter.abandoned',
            topic,
            partition,
            offset: letters[0]!.offset,
            err: error.message,
          },
          'stopping: dead letters left unwritten and uncommitted',
        );
        return;
      }
      const delay = Math.min(
        errors.retryDelayMaxMs,
        (this.#o.retryDelayMs ?? 200) * 2 ** attempt,
        Math.max(0, errors.retryTimeoutMs - elapsed),
      );
      logger.warn(
        {
          event: 'dead-letter.retry',
          topic,
          partition,
          attempt,
          delayMs: delay,
          sink: sink.description,
          err: error.detail,
        },
        'dead-letter write failed; retrying',
      );
      await this.#sleep(delay);
    }
  }

  #written(topic: string, partition: number, letters: readonly DeadLetter[]): void {
    this.#delivered += letters.length;
    const reasons: Record<string, number> = {};
    for (const l of letters) {
      this.#o.metrics.deadLetters.inc({ topic, reason: l.reason });
      reasons[l.reason] = (reasons[l.reason] ?? 0) + 1;
    }
    // One line per batch, not per record: a stream of bad input must not flood the logs.
    this.#o.logger.warn(
      {
        event: 'dead-letter',
        topic,
        partition,
        count: letters.length,
        reasons,
        offsets: letters.slice(0, 10).map((l) => l.offset),
        first: { offset: letters[0]!.offset, reason: letters[0]!.reason, detail: letters[0]!.detail },
      },
      `${letters.length} record(s) sent to the dead-letter output`,
    );
    // Stopped meanwhile: the hold may sit on one of these offsets; releasing them could release it.
    if (this.isStopped(topic, partition)) return;
    this.#o.resolved(
      topic,
      partition,
      letters.map((l) => l.offset),
    );
  }

  #window(topic: string, partition: number): DeadLetterWindow | undefined {
    const { tolerance, window, maxDeadLetterRatio } = this.#o.errors;
    if (tolerance === 'all') return undefined;
    const key = tpKey(topic, partition);
    let w = this.#windows.get(key);
    if (!w) {
      // `none` is Connect's default: the first dead letter stops the partition.
      w =
        tolerance === 'none'
          ? new DeadLetterWindow(1, 0)
          : new DeadLetterWindow(
              window,
              maxDeadLetterRatio,
              (this.#replicaWindow ??= new DeadLetterWindow(window, maxDeadLetterRatio)),
            );
      this.#windows.set(key, w);
    }
    return w;
  }

  #stopForRatio(topic: string, partition: number, exceeded: RatioExceeded): void {
    const { tolerance, maxDeadLetterRatio } = this.#o.errors;
    const { common } = exceeded;
    const on = common.field === undefined ? '' : ` on field "${common.field}"`;
    const share =
      tolerance === 'none'
        ? 'a record is a dead letter and errors.tolerance is "none"'
        : `${exceeded.deadLetters} of the last ${exceeded.records} records are dead letters, more than errors.maxDeadLetterRatio ${maxDeadLetterRatio}`;
    this.stop(topic, partition, exceeded.firstOffending, 'dead-letter-ratio-exceeded', {
      message: `${share}; most common: ${common.reason}${on} (${common.count}), e.g. ${common.detail}. Fix the definition (or set errors.tolerance "all") and restart`,
      fields: {
        deadLetters: exceeded.deadLetters,
        records: exceeded.records,
        commonReason: common.reason,
        commonField: common.field,
        commonDetail: common.detail,
      },
    });
  }

  /**
   * Stops a partition: commits held below `offset`, fetching paused, the gauge set and
   * one error line. Also for what is not a dead letter but stops the same way (a
   * corrupt compressed batch: fetch-positions.ts).
   */
  stop(
    topic: string,
    partition: number,
    offset: number,
    reason: PartitionStopReason,
    report: { message: string; cause?: unknown; fields: Record<string, unknown> },
  ): void {
    const key = tpKey(topic, partition);
    if (this.#stopped.has(key)) {
      // Paused again: a consumer restart after a crash forgets every pause.
      this.#o.pause(topic, partition);
      return;
    }
    const error = new PartitionStoppedError(topic, partition, offset, reason, report.message, report.cause);
    this.#stopped.set(key, error);
    // Hold before pausing: from here on no commit of this partition may pass `offset`.
    this.#o.hold(topic, partition, offset);
    this.#o.pause(topic, partition);
    this.#o.metrics.partitionStopped.set({ topic, partition: String(partition), reason }, 1);
    this.#o.logger.error(
      { event: 'partition.stopped', topic, partition, offset, reason, ...report.fields },
      `${error.message}; records from offset ${offset} on stay uncommitted until this replica restarts`,
    );
  }

  async #untilClosed(write: Promise<void>): Promise<WriteOutcome> {
    const signal = this.#closed.signal;
    if (signal.aborted) return 'closed';
    let onAbort: (() => void) | undefined;
    const closed = new Promise<'closed'>((resolve) => {
      onAbort = () => resolve('closed');
      signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      return await Promise.race([
        write.then(
          (): WriteOutcome => ({ ok: true }),
          (error: unknown): WriteOutcome => ({ ok: false, error }),
        ),
        closed,
      ]);
    } finally {
      if (onAbort) signal.removeEventListener('abort', onAbort);
    }
  }

  async #sleep(ms: number): Promise<void> {
    const signal = this.#closing.signal;
    if (signal.aborted) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
    });
  }
}

function copyHeaders(headers: IHeaders | undefined): IHeaders | undefined {
  if (!headers) return undefined;
  const copy: IHeaders = {};
  const one = (v: Buffer | string): Buffer | string => (Buffer.isBuffer(v) ? Buffer.from(v) : v);
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    copy[name] = Array.isArray(value) ? value.map(one) : one(value);
  }
  return copy;
}
