import { mkdtempSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TEST_BROKER_PORT, configuredBrokers, kafkaLocal } from './kafka-local';
import { LINGERING_SERVERS_ENV } from './leased-local-server';

/**
 * Starts the project's local Kafka broker unless brokers are configured. The
 * teardown stops only a broker this setup started (see global-teardown.ts), and the
 * suites' servers their last suite left running (leased-local-server.ts).
 */
export default function globalSetup(): void {
  process.env[LINGERING_SERVERS_ENV] = mkdtempSync(path.join(os.tmpdir(), 'kl-lingering-servers-'));
  const configured = configuredBrokers();
  if (configured) {
    console.log(`\njest: using the configured Kafka brokers ${configured}`);
    return;
  }
  const alreadyRunning = kafkaLocal('status').code === 0;
  const started = kafkaLocal('start');
  if (started.code !== 0) throw new Error(`could not start the local Kafka broker:\n${started.output}`);
  process.env.KAFKA_BROKERS = `127.0.0.1:${TEST_BROKER_PORT}`;
  process.env.KAFKA_LANCE_TEST_BROKER_STARTED = alreadyRunning ? '' : '1';
  console.log(
    alreadyRunning
      ? `\njest: reusing the local Kafka broker already running on 127.0.0.1:${TEST_BROKER_PORT} (left running)`
      : `\njest: ${started.output}`,
  );
}
