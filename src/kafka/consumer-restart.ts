import type { Logger } from '../common/logger';
import type { Metrics } from '../metrics/metrics';
import { brokerAuthFailureOf } from './protocol/broker-auth-failure';
import { restartableCrashOf, type RestartableCrash } from './protocol/crash-cause';

/** The first restart after a crash, doubled up to the last. */
const FIRST_RETRY_MS = 2_000;
const LAST_RETRY_MS = 60_000;

/**
 * The kafkajs consumer's `retry`: kafkajs's default retries, and no restart of its own
 * after a crash (every one is ConsumerRestart's).
 */
export const CONSUMER_RETRY = {
  retries: 5,
  restartOnFailure: (): Promise<boolean> => Promise.resolve(false),
};

/** Why this replica started its crashed consumer again. */
export type ConsumerRestartReason = 'authentication_refused' | RestartableCrash['reason'];

/**
 * Every start of the kafkajs consumer after a crash. kafkajs is told never to restart
 * its consumer itself (`restartOnFailure` answers false, ingestion.ts): a start of its
 * own runs from a timer no one can wait for, and a stop while it joins leaves its runner
 * fetching with no one to stop it. So every crash comes here, and a start under way is
 * waited for by whatever stops or reruns the consumer (`settled`). What it staged stays
 * staged (durable, resolved by any later start), nothing is committed without a group,
 * and the consumer runs again after a growing delay, reset by the next join:
 *
 * - after what kafkajs itself would restart from (protocol/crash-cause.ts: retries
 *   exhausted, a retriable innermost cause such as a closed connection);
 * - after a coordinator lookup no broker answered, as while every broker restarts,
 *   which kafkajs would leave stopped;
 * - after the broker refuses credentials that it accepted before (a password rotated
 *   before the definition's secret, a revoked certificate), with
 *   kafka_lance_broker_authentication_failing set until it joins again (the
 *   KafkaLanceBrokerAuthenticationFailing alert). A start refused this way stops with
 *   exit code 2 instead (src/cli/errors.ts): there the definition is what is wrong.
 *
 * Each crash logs a warning (`kafka.consumer.restarting`, or `kafka.authentication.lost`)
 * and the next join `kafka.consumer.rejoined`; kafka_lance_consumer_stopped is 1 from the
 * crash to the join (the KafkaLanceConsumerStopped alert). Any other crash is the
 * replica's end (the caller's fatal path: exit, and a restart recovers it).
 */
export class ConsumerRestart {
  #delayMs = FIRST_RETRY_MS;
  #timer: NodeJS.Timeout | undefined;
  #authenticationFailing = false;
  #restarting = false;
  #stopped = false;
  #inFlight: Promise<void> | undefined;
  #onStop: () => void = () => undefined;
  /** Resolves when the replica stops: a wait for a restart gives way to the stop. */
  readonly stopped = new Promise<void>((resolve) => (this.#onStop = resolve));

  constructor(
    private readonly options: {
      readonly logger: Logger;
      readonly metrics: Metrics;
      /** Starts the consumer again (kafkajs's run after a crash). */
      readonly restart: () => Promise<void>;
      /** Whether the consumer joined its group once: a refusal before is the definition's fault. */
      readonly joined: () => boolean;
      /** The replica cannot go on: a restart itself failed for another cause. */
      readonly fail: (error: Error) => void;
    },
  ) {}

  /** A consumer crash: true when a restart is scheduled, false when the replica cannot go on. */
  onCrash(error: unknown): boolean {
    if (this.#stopped) return false;
    const reason = this.#reasonOf(error);
    if (reason === undefined) return false;
    this.options.metrics.consumerRestarts.inc({ reason });
    this.options.metrics.consumerStopped.set(1);
    this.#restarting = true;
    this.#schedule();
    return true;
  }

  /** Resolves once no restart is under way (one that fails is reported, not thrown here). */
  async settled(): Promise<void> {
    while (this.#inFlight) await this.#inFlight;
  }

  /**
   * Takes over a restart that is only scheduled: the caller runs the consumer itself
   * (a subscription change), which must not meet this one's run halfway.
   */
  cancelScheduled(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #reasonOf(error: unknown): ConsumerRestartReason | undefined {
    const { logger, metrics } = this.options;
    // A handshake closed midway is not read as a listener without TLS here (`tls` false): a
    // broker shutting down, or a load balancer with no ready backend, closes it the same way.
    // At start it is the definition's fault (src/cli/replica-lifecycle.ts reads it there).
    const refused = brokerAuthFailureOf(error, false);
    if (refused) {
      if (!this.options.joined()) return undefined;
      this.#authenticationFailing = true;
      metrics.brokerAuthenticationFailing.set(1);
      metrics.brokerAuthenticationFailures.inc();
      logger.warn(
        {
          event: 'kafka.authentication.lost',
          cause: refused.cause,
          option: refused.option,
          retryInMs: this.#delayMs,
        },
        `the broker refuses this replica: ${refused.cause}; staged records are kept, retrying (check ${refused.option})`,
      );
      return 'authentication_refused';
    }
    const crash = restartableCrashOf(error);
    if (crash === undefined) return undefined;
    logger.warn(
      {
        event: 'kafka.consumer.restarting',
        reason: crash.reason,
        cause: crash.cause,
        retryInMs: this.#delayMs,
      },
      `the Kafka consumer stopped (${crash.cause}); staged records are kept, starting it again`,
    );
    return crash.reason;
  }

  #schedule(): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#stopped) return;
      // kafkajs reports a failed start as another crash (handled by onCrash); a run that
      // throws instead is retried the same way when its cause qualifies.
      const run = this.options
        .restart()
        .catch((e: unknown) => {
          if (!this.#stopped && !this.onCrash(e))
            this.options.fail(e instanceof Error ? e : new Error(String(e)));
        })
        .finally(() => {
          if (this.#inFlight === run) this.#inFlight = undefined;
        });
      this.#inFlight = run;
    }, this.#delayMs);
    this.#delayMs = Math.min(this.#delayMs * 2, LAST_RETRY_MS);
  }

  /** The consumer joined its group: the cluster reachable and the credentials accepted again. */
  onJoin(): void {
    this.#delayMs = FIRST_RETRY_MS;
    this.options.metrics.consumerStopped.set(0);
    if (this.#restarting) {
      this.#restarting = false;
      this.options.logger.info(
        { event: 'kafka.consumer.rejoined' },
        'the Kafka consumer joined its group again',
      );
    }
    if (!this.#authenticationFailing) return;
    this.#authenticationFailing = false;
    this.options.metrics.brokerAuthenticationFailing.set(0);
    this.options.logger.info(
      { event: 'kafka.authentication.restored' },
      'the broker accepts this replica again',
    );
  }

  stop(): void {
    this.#stopped = true;
    this.#onStop();
    clearTimeout(this.#timer);
  }
}
