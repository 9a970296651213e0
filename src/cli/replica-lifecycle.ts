import { errorMessage } from '../common/errors';
import { createLogger, type Logger } from '../common/logger';
import { Metrics } from '../metrics/metrics';
import { startMetricsServer } from '../metrics/server';
import type { Replica } from '../replica/replica';
import type { HeldSignals } from './early-signals';
import { brokerAuthFailureOf } from '../kafka/protocol/broker-auth-failure';
import { BrokerAuthenticationError, BrokerUnreachableError, isConnectionFailure } from './errors';

/**
 * The life of a `kafka-lance run` process around its one replica: the metrics server,
 * the signal handlers, the order things stop in and the exit codes (0: stopped
 * gracefully; 1: the replica failed, its stop failed or timed out; 130: a second
 * signal). The command says how to start the replica; this module decides when the
 * process ends.
 */

const SHUTDOWN_TIMEOUT_MS = Number(process.env.KAFKA_LANCE_SHUTDOWN_TIMEOUT_MS ?? 25_000);
/** The last part of a graceful stop in which no publication starts: 1/3 of it, at most 10 s. */
const DRAIN_MARGIN_MS = Math.min(10_000, SHUTDOWN_TIMEOUT_MS / 3);

export interface ReplicaLifecycleOptions {
  /** The resolved brokers, to name them when none can be reached. */
  readonly brokers: readonly string[];
  /** Whether the client connects with TLS (a closed handshake then means a listener without it). */
  readonly tls: boolean;
  readonly logLevel: string;
  readonly metricsPort: number;
  readonly metricsHost: string;
  /** Stop signals held while the program loaded: one held is acted on as if it came now. */
  readonly heldSignals?: HeldSignals;
  /** Starts the replica with the process's logger and metrics registry. */
  readonly start: (services: { readonly logger: Logger; readonly metrics: Metrics }) => Promise<Replica>;
}

/** Runs the replica until a signal stops it or it fails; ends the process either way. */
export async function runReplicaLifecycle(o: ReplicaLifecycleOptions): Promise<void> {
  const logger = createLogger({ level: o.logLevel as 'info' });
  const metrics = new Metrics();
  const running: { replica?: Replica } = {};
  // Served before recovery starts: /healthz answers at once, /readyz once joined.
  const server = await startMetricsServer({
    port: o.metricsPort,
    host: o.metricsHost,
    metrics,
    ready: () => running.replica?.ready ?? false,
  });
  logger.info(
    { event: 'metrics.listening', port: server.port, host: o.metricsHost },
    'metrics server listening',
  );
  // Handlers go in before startup: a signal during recovery or the first join still
  // gets a graceful stop once the replica is up.
  let stopping = false;
  const starting = o.start({ logger, metrics });
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn({ event: 'replica.signal', signal }, 'second signal: exiting at once');
      process.exit(130);
    }
    stopping = true;
    logger.info({ event: 'replica.signal', signal }, 'signal received: stopping gracefully');
    const timer = setTimeout(() => {
      logger.error(
        { event: 'replica.stop.timeout', timeoutMs: SHUTDOWN_TIMEOUT_MS },
        'graceful stop timed out',
      );
      process.exit(1);
    }, SHUTDOWN_TIMEOUT_MS);
    timer.unref();
    // Publications start until a margin before the timeout (one may take seconds on a
    // slow store; a Lance add is never interrupted), so the exit still comes in time.
    const drainUntil = Date.now() + SHUTDOWN_TIMEOUT_MS - DRAIN_MARGIN_MS;
    starting
      .then((replica) => replica.stop(drainUntil))
      .then(
        () => process.exit(0),
        (error: unknown) => {
          logger.error({ event: 'replica.stop.failed', err: error }, errorMessage(error));
          process.exit(1);
        },
      );
  };
  if (o.heldSignals) {
    o.heldSignals.deliverTo(onSignal);
  } else {
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  }
  const replica = await starting.catch((error: unknown) => {
    const refused = brokerAuthFailureOf(error, o.tls);
    if (refused) throw new BrokerAuthenticationError(o.brokers, refused);
    throw isConnectionFailure(error) ? new BrokerUnreachableError(o.brokers, error) : error;
  });
  running.replica = replica;
  const error = await replica.failed;
  logger.fatal({ event: 'replica.failed', err: error }, 'replica failed; exiting so that a restart recovers');
  process.exit(1);
}
