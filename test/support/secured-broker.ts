import * as path from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { leasedLocalServer } from './leased-local-server';
import { runBounded } from './run-bounded';

/**
 * The broker with secured listeners (deploy/kafka-local, KAFKA_LOCAL_SECURITY=sasl_ssl),
 * started once for the suites that use it and stopped after the last of them. Its ports
 * and test credentials are the script's (it prints them at start).
 */
export const SECURED_PORT = Number(process.env.KAFKA_SECURED_TEST_PORT ?? 19500);
const HOST = '127.0.0.1';
export const SECURED = {
  /** SASL_SSL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (unsecured JWT). */
  saslSsl: `${HOST}:${SECURED_PORT}`,
  /** SSL requiring a client certificate. */
  ssl: `${HOST}:${SECURED_PORT + 1}`,
  /** PLAINTEXT: the tests' own admin and producer, and the "TLS client on a plain listener" case. */
  plaintext: `${HOST}:${SECURED_PORT + 2}`,
  /** SSL without client certificates. */
  tls: `${HOST}:${SECURED_PORT + 3}`,
  plain: { username: 'plain-user', password: 'plain-secret' },
  scram256: { username: 'scram256-user', password: 'scram256-secret' },
  scram512: { username: 'scram512-user', password: 'scram512-secret' },
} as const;

const DEPLOY = path.resolve(__dirname, '../../deploy/kafka-local');
const HOME = process.env.KAFKA_LOCAL_HOME ?? path.join(DEPLOY, '.cache');
const WORK = path.join(HOME, `secured-${SECURED_PORT}`);
/** ca.crt, client.crt/.key, client-expired.crt/.key (tls-material.sh). */
export const TLS_DIR = path.join(WORK, 'tls');

const SCRIPT = path.join(DEPLOY, 'kafka-local');
const SECURED_ENV = { KAFKA_LOCAL_SECURITY: 'sasl_ssl', KAFKA_LOCAL_PORT: String(SECURED_PORT) };

function securedKafkaLocal(command: 'start' | 'stop' | 'status'): { code: number; output: string } {
  const result = runBounded(SCRIPT, [command], { env: { ...process.env, ...SECURED_ENV } });
  return { code: result.status ?? 1, output: `${result.stdout}${result.stderr}`.trim() };
}

/** Creates a SCRAM user of the secured broker, or rotates its password. */
export function setScramUser(
  name: string,
  password: string,
  mechanism: 'SCRAM-SHA-256' | 'SCRAM-SHA-512' = 'SCRAM-SHA-256',
): void {
  const result = runBounded(SCRIPT, ['scram-user', name, password, mechanism], {
    env: { ...process.env, ...SECURED_ENV },
  });
  if (result.status !== 0) throw new Error(`scram-user ${name} failed:\n${result.stdout}${result.stderr}`);
}

/** Leases the secured broker for a suite; returns a kafkajs client on its PLAINTEXT listener. */
export function securedBrokerSuite(): Kafka {
  leasedLocalServer({
    work: WORK,
    label: 'the secured Kafka broker',
    run: securedKafkaLocal,
    stopCommand: { script: SCRIPT, env: SECURED_ENV },
  });
  return new Kafka({
    clientId: 'secured-suite',
    brokers: [SECURED.plaintext],
    logLevel: logLevel.NOTHING,
    retry: { retries: 8, initialRetryTime: 200 },
  });
}
