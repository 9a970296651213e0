import type { Logger } from '../common/logger';
import type { Metrics } from '../metrics/metrics';
import { brokerAuthFailureOf } from './protocol/broker-auth-failure';
import { brokerUnavailableOf } from './protocol/broker-unavailable';

/** The first restart after a crash, doubled up to the last. */
const FIRST_RETRY_MS = 2_000;
const LAST_RETRY_MS = 60_000;

/** Why this replica started its crashed consumer again. */
export type ConsumerRestartReason = 'authentication_refused' | 'broker_unavailable';

/**
 * Starts the kafkajs consumer again after a crash kafkajs does not restart it from, when
 * the cause is outside this replica and may pass. What it staged stays staged (durable,
 * resolved by any later start), nothing is committed without a group, and the restart
 * comes after a growing delay, reset by the next join. Two causes qualify:
 *
 * - The broker refuses credentials that it accepted before (a password rotated before
 *   the definition's secret, a revoked certificate): a warning per refusal and
 *   kafka_lance_broker_authentication_failing set until it joins again (the
 *   KafkaLanceBrokerAuthenticationFailing alert). A start refused this way stops with
 *   exit code 2 instead (src/cli/errors.ts): there the definition is what is wrong.
 * - The cluster is out of reach (protocol/broker-unavailable.ts), as while every broker
 *   restarts: a warning per crash, and a log line when it joins.
 *
 * From the crash to the next join kafka_lance_consumer_stopped is 1 (the
 * KafkaLanceConsumerStopped alert). A restart under way is waited for by whatever stops
 * or reruns the consumer (`settled`): a kafkajs stop while its runner is still joining
 * leaves that runner fetching with no one to stop it.
 *
 * Any other crash is the replica's end (the caller's fatal path: exit, and a restart
 * recovers it).
 */
export class ConsumerRestart {
  #delayMs = FIRST_RETRY_MS;
  #timer: NodeJS.Timeout | undefined;
  #authenticationFailing = false;
  #unavailable = false;
  #stopped = false;
  #inFlight: Promise<void> | undefined;

  constructor(
    private readonly options: {
      readonly logger: Logger;
      readonly metrics: Metrics;
      /** Whether the client connects with TLS (to read a closed handshake). */
      readonly tls: boolean;
      /** Starts the consumer again (kafkajs's run after a crash without restart). */
      readonly restart: () => Promise<void>;
      /** Whether the consumer joined its group once: a refusal before is the definition's fault. */
      readonly joined: () => boolean;
      /** The replica cannot go on: a restart itself failed for another cause. */
      readonly fail: (error: Error) => void;
    },
  ) {}

  /** A consumer crash kafkajs will not restart: true when a restart is scheduled. */
  onCrash(error: unknown): boolean {
    if (this.#stopped) return false;
    const reason = this.#reasonOf(error);
    if (reason === undefined) return false;
    this.options.metrics.consumerRestarts.inc({ reason });
    this.options.metrics.consumerStopped.set(1);
    this.#schedule();
    return true;
  }

  /** Resolves once no restart is under way (one that fails is reported, not thrown here). */
  async settled(): Promise<void> {
    while (this.#inFlight) await this.#inFlight;
  }

  #reasonOf(error: unknown): ConsumerRestartReason | undefined {
    const { logger, metrics } = this.options;
    const refused = brokerAuthFailureOf(error, this.options.tls);
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
    const unavailable = brokerUnavailableOf(error);
    if (unavailable === undefined) return undefined;
    this.#unavailable = true;
    logger.warn(
      { event: 'kafka.unavailable', cause: unavailable, retryInMs: this.#delayMs },
      `${unavailable}; staged records are kept, starting the consumer again`,
    );
    return 'broker_unavailable';
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
    if (this.#unavailable) {
      this.#unavailable = false;
      this.options.logger.info({ event: 'kafka.available' }, 'the Kafka cluster is reachable again');
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
    clearTimeout(this.#timer);
  }
}
