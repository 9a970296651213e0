import * as path from 'node:path';
import { runBounded } from './run-bounded';

/** The port of the broker jest starts when no brokers are configured (away from a demo broker on 9092). */
export const TEST_BROKER_PORT = Number(process.env.KAFKA_TEST_PORT ?? 19092);
const SCRIPT = path.resolve(__dirname, '../../deploy/kafka-local/kafka-local');

export function kafkaLocal(
  command: 'start' | 'stop' | 'status',
  port = TEST_BROKER_PORT,
): { code: number; output: string } {
  const result = runBounded(SCRIPT, [command], { env: { ...process.env, KAFKA_LOCAL_PORT: String(port) } });
  return { code: result.status ?? 1, output: `${result.stdout}${result.stderr}`.trim() };
}

/** Brokers from the environment (KAFKA_BOOTSTRAP_SERVERS, or its alias KAFKA_BROKERS). */
export function configuredBrokers(): string | undefined {
  return process.env.KAFKA_BOOTSTRAP_SERVERS ?? process.env.KAFKA_BROKERS;
}
