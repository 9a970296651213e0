import { spawnSync } from 'node:child_process';
import { Kafka, logLevel, type Admin } from 'kafkajs';
import { KAFKA_LOCAL } from './paths';
import { registerCompressionCodecs } from '../kafka/protocol/compression';

/**
 * The demos' Kafka client and its end: silent (a demo prints its own lines), quick to
 * say that a broker is not there, and the embedded broker stopped only when the demo
 * started it.
 */

export function demoKafka(clientId: string, brokers: string[]): Kafka {
  registerCompressionCodecs();
  return new Kafka({ clientId, brokers, logLevel: logLevel.NOTHING, connectionTimeout: 3_000 });
}

/** A demo's last step, once its replicas are stopped: the admin client closed, the embedded broker stopped. */
export async function closeDemoBroker(
  admin: Admin,
  embedded: { readonly started: boolean },
  print: (line: string) => void,
): Promise<void> {
  await admin.disconnect();
  if (embedded.started) {
    spawnSync(KAFKA_LOCAL, ['stop'], { stdio: 'ignore' });
    print('Stopped the embedded broker.');
  }
}
