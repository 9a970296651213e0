import type { Logger } from '../common/logger';
import type { Metrics } from '../metrics/metrics';
import { brokerAuthFailureOf } from './protocol/broker-auth-failure';

/** The first retry after a refusal, doubled up to the last. */
const FIRST_RETRY_MS = 2_000;
const LAST_RETRY_MS = 60_000;

/**
 * A running replica whose credentials the broker stops accepting (a password rotated
 * before the definition's secret, a revoked certificate): kafkajs crashes its consumer
 * with an error it never restarts on (an authentication failure is not retriable). A
 * start refused this way stops with exit code 2 (src/cli/errors.ts); a replica that was
 * running goes on instead: what it staged stays staged (durable, resolved by any later
 * start), nothing is committed without a group, and the consumer is started again with a
 * growing delay, with a warning per refusal and kafka_lance_broker_authentication_failing
 * set until it joins again (the KafkaLanceBrokerAuthenticationFailing alert).
 */
export class AuthenticationRetry {
  #delayMs = FIRST_RETRY_MS;
  #timer: NodeJS.Timeout | undefined;
  #failing = false;
  #stopped = false;

  constructor(
    private readonly options: {
      readonly logger: Logger;
      readonly metrics: Metrics;
      /** Whether the client connects with TLS (to read a closed handshake). */
      readonly tls: boolean;
      /** Starts the consumer again (kafkajs's run after a crash without restart). */
      readonly restart: () => Promise<void>;
    },
  ) {}

  /** A consumer crash kafkajs will not restart: true when it is a refusal this retries. */
  onCrash(error: unknown): boolean {
    if (this.#stopped) return false;
    const refused = brokerAuthFailureOf(error, this.options.tls);
    if (!refused) return false;
    const { logger, metrics } = this.options;
    this.#failing = true;
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
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#stopped) return;
      // A refusal again comes back as another crash, handled here.
      this.options.restart().catch((e: unknown) => {
        if (!this.onCrash(e))
          logger.error({ event: 'kafka.authentication.restart-failed', err: e }, 'consumer restart failed');
      });
    }, this.#delayMs);
    this.#delayMs = Math.min(this.#delayMs * 2, LAST_RETRY_MS);
    return true;
  }

  /** The consumer joined its group: credentials accepted again. */
  onJoin(): void {
    this.#delayMs = FIRST_RETRY_MS;
    if (!this.#failing) return;
    this.#failing = false;
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
