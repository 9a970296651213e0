import { randomBytes } from 'node:crypto';
import { ConfigResourceTypes, Kafka, logLevel, type Admin } from 'kafkajs';
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

/** Group timings for tests that wait for a dead or paused member's session to expire. */
export interface FaultSessionTimings {
  readonly sessionTimeoutMs: number;
  readonly heartbeatIntervalMs: number;
}

const FAULT_SESSION_MS = 3_000;
const faultTimings = new WeakMap<Admin, Promise<FaultSessionTimings>>();

/**
 * A session of 3 s where the broker grants it (deploy/kafka-local sets
 * `group.min.session.timeout.ms` to 1 s), else the broker's minimum (Kafka's default 6 s,
 * on a broker started before that setting): every wait for a member's session to expire
 * is then seconds shorter, and the same tests still pass on an older broker. Not 1 s: a
 * replica also gives up a claim that has not landed within a session, which a loaded
 * two-core machine can take longer than that to land.
 */
export function faultSessionTimings(admin: Admin): Promise<FaultSessionTimings> {
  const known = faultTimings.get(admin);
  if (known) return known;
  const timings = (async () => {
    const { brokers } = await admin.describeCluster();
    const { resources } = await admin.describeConfigs({
      includeSynonyms: false,
      resources: brokers.map((b) => ({
        type: ConfigResourceTypes.BROKER,
        name: String(b.nodeId),
        configNames: ['group.min.session.timeout.ms'],
      })),
    });
    const minimums = resources.flatMap((r) => r.configEntries.map((e) => Number(e.configValue)));
    const sessionTimeoutMs = Math.max(FAULT_SESSION_MS, ...minimums);
    // A sixth of the session, as the 6 s / 1 s the suites use elsewhere.
    return { sessionTimeoutMs, heartbeatIntervalMs: Math.round(sessionTimeoutMs / 6) };
  })();
  faultTimings.set(admin, timings);
  return timings;
}
