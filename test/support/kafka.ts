import { randomBytes } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import { configuredBrokers } from './kafka-local';

/** The broker list every test uses: the one global-setup started, or the configured one. */
export function testBrokers(): string[] {
  const brokers = configuredBrokers();
  if (!brokers) throw new Error('no Kafka brokers: run the tests through jest (global-setup starts one)');
  return brokers.split(',').map((b) => b.trim());
}

/** A name no other test (or earlier run against the same broker) uses. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
}

export function testKafka(clientId = uniqueName('test')): Kafka {
  return new Kafka({
    clientId,
    brokers: testBrokers(),
    logLevel: logLevel.NOTHING,
    retry: { retries: 8, initialRetryTime: 200 },
  });
}
