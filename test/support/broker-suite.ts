import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import type { Admin, Kafka } from 'kafkajs';
import { ensureTopicsServed, untilTopicServed } from '../../src/kafka/protocol/topic-ready';
import { writeConsumer } from './ingestion-fixture';
import { testKafka, uniqueName } from './kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from './rows';

export interface BrokerSuite {
  readonly kafka: Kafka;
  readonly admin: Admin;
  /** A scratch directory for definitions and dead letters, removed after the suite. */
  readonly work: string;
}

/**
 * The set-up every integration suite shares: an admin client on the test broker, a
 * scratch directory, and no replica process left running afterwards.
 */
export function brokerSuite(label: string): BrokerSuite {
  const kafka = testKafka();
  const state: { admin?: Admin; work?: string } = {};
  beforeAll(async () => {
    state.admin = kafka.admin();
    await state.admin.connect();
    state.work = await tempDir(label);
  });
  afterAll(async () => {
    await ReplicaProcess.killAll();
    await state.admin?.disconnect();
    if (state.work) await fsp.rm(state.work, { recursive: true, force: true });
  });
  return {
    kafka,
    get admin() {
      return state.admin!;
    },
    get work() {
      return state.work!;
    },
  };
}

export interface TestConsumer {
  readonly topic: string;
  readonly name: string;
  readonly groupId: string;
  /** The definition file, for `kafka-lance run -c`. */
  readonly file: string;
}

/**
 * A new topic and a consumer definition for it: the log schema the fixtures produce
 * (`n`, `level`, `service`, `message`), dead letters to a file, and group timings
 * short enough for tests that kill replicas (a heartbeat every 500 ms: an idle fetch waits
 * that long at most, and each stop and rebalance waits for it). `extra` overrides any of
 * it; `topicConfig` sets topic configs at creation (`cleanup.policy`, `segment.ms`, ...).
 */
export async function topicAndConsumer(
  suite: BrokerSuite,
  partitions: number,
  extra: Record<string, unknown> = {},
  topicConfig: Readonly<Record<string, string>> = {},
): Promise<TestConsumer> {
  const topic = uniqueName('topic');
  const name = uniqueName('c').replace(/[^A-Za-z0-9_-]/g, '');
  const configEntries = Object.entries(topicConfig).map(([name, value]) => ({ name, value }));
  await ensureTopicsServed(suite.admin, [{ topic, numPartitions: partitions, configEntries }]);
  const file = await writeConsumer(suite.work, {
    name,
    topics: [topic],
    table: 'logs',
    schema: {
      fields: {
        n: { type: 'int64', nullable: false },
        level: 'string',
        service: { type: 'string', nullable: false },
        message: 'string',
      },
    },
    deadLetter: { file: path.join(suite.work, `${name}.dlq.jsonl`) },
    durabilityIntervalMs: 200,
    sessionTimeoutMs: 6_000,
    heartbeatIntervalMs: 500,
    workers: 2,
    ...extra,
  });
  return { topic, name, groupId: `kafka-lance-${name}`, file };
}

/** Returns once every partition of a topic just created answers (src/kafka/protocol/topic-ready.ts says why). */
export async function untilHosted(admin: Admin, topic: string, partitions: number): Promise<void> {
  await untilTopicServed(admin, topic, partitions);
}
