import { trackClusters } from './coordinator-hook';
import { Kafka, logLevel, type KafkaConfig, type LogEntry } from 'kafkajs';
import type { Logger } from '../../common/logger';
import type { ResolvedConsumer } from '../../config';
import { keepAdminMetadata } from './admin-metadata';
import { CORRUPT_BATCH_MESSAGE, registerCompressionCodecs } from './compression';
import { installConnectionReads } from './connection-reads';
import { framedSocketFactory } from './framed-socket';

const LEVELS: Record<number, 'error' | 'warn' | 'info' | 'debug'> = {
  [logLevel.ERROR]: 'error',
  [logLevel.WARN]: 'warn',
  [logLevel.INFO]: 'info',
  [logLevel.DEBUG]: 'debug',
};

/** kafkajs with its logs routed through our JSON logger (one log stream per process). */
export function createKafka(consumer: ResolvedConsumer, logger: Logger, clientId?: string): Kafka {
  registerCompressionCodecs();
  installConnectionReads();
  const kafkaLogger = logger.child({ component: 'kafkajs' });
  const config: KafkaConfig = {
    clientId: clientId ?? consumer.client.clientId ?? `kafka-lance-${consumer.name}`,
    brokers: consumer.brokers,
    socketFactory: framedSocketFactory,
    logLevel: logLevel.WARN,
    logCreator:
      () =>
      ({ level, log }: LogEntry) => {
        const { message, ...extra } = log;
        // kafkajs logs a rebalance as an error while the group recovers on its own: keep it a warning.
        // It also logs each OFFSET_OUT_OF_RANGE fetch answer as an error; the fetch hook handles
        // those (and logs kafka.offsets.lost or kafka.offsets.ahead-of-log): an info line here.
        // The same for a corrupt compressed batch: the partition's stop is its one error line.
        const method =
          isHandledOutOfRange(message, extra) || isCorruptBatch(message, extra)
            ? 'info'
            : (LEVELS[level] ?? 'info');
        kafkaLogger[method](extra, message);
      },
  };
  if (consumer.client.ssl !== undefined) config.ssl = consumer.client.ssl;
  if (consumer.client.sasl !== undefined) config.sasl = consumer.client.sasl;
  if (consumer.client.connectionTimeout !== undefined)
    config.connectionTimeout = consumer.client.connectionTimeout;
  if (consumer.client.requestTimeout !== undefined) config.requestTimeout = consumer.client.requestTimeout;
  // Every client's metadata can then let go of a topic deleted under a pattern (topic-subscription.ts),
  // and an admin's is reused between its offset reads (admin-metadata.ts).
  return keepAdminMetadata(trackClusters(new Kafka(config)));
}

/** kafkajs's "Response Fetch" error line for an offset out of range (kafkajs 2.2.4 wording). */
function isHandledOutOfRange(message: string, extra: Record<string, unknown>): boolean {
  return (
    message.startsWith('Response Fetch') &&
    typeof extra.error === 'string' &&
    extra.error.includes('not within the range of offsets')
  );
}

/** kafkajs's "Response Fetch" error line for a batch our codecs found corrupt (it logs only the message). */
function isCorruptBatch(message: string, extra: Record<string, unknown>): boolean {
  return (
    message.startsWith('Response Fetch') &&
    typeof extra.error === 'string' &&
    extra.error.startsWith(CORRUPT_BATCH_MESSAGE)
  );
}
