import { Kafka, logLevel, type Admin } from 'kafkajs';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { topicAndConsumer, untilHosted, type BrokerSuite } from '../support/broker-suite';
import { assignedOf, finishFaultRun, sleep, until, waitForJoin, type Named } from '../support/faults';
import { produceRecords } from '../support/ingestion-fixture';
import { KafkaCluster } from '../support/kafka-cluster';
import { TEST_BROKER_PORT } from '../support/kafka-local';
import { tempDir } from '../support/rows';
import { ReplicaProcess } from '../../src/harness/replica-process';

/**
 * A cluster of three brokers, as production runs (every other suite has one), topics and
 * the group's offsets replicated on all three: a topic's partitions lead on different
 * brokers, so a replica fetches from several at once, and kafkajs holds one answer per
 * broker; and a broker lost moves its partitions' leaders (and maybe the group's
 * coordinator) to the others while replicas consume. Two real replicas, one SIGKILLed mid-run and
 * restarted on its data directory: every record lands once and the commits reach the log end.
 * Run after `npm run build`.
 */
const PORT = Number(process.env.KAFKA_CLUSTER_TEST_PORT ?? TEST_BROKER_PORT + 20);
const state: { cluster?: KafkaCluster; admin?: Admin; work?: string; kafka?: Kafka } = {};
const suite: BrokerSuite = {
  get kafka() {
    return state.kafka!;
  },
  get admin() {
    return state.admin!;
  },
  get work() {
    return state.work!;
  },
};

beforeAll(async () => {
  state.work = await tempDir('kl-multi-broker');
  // Every topic and the group's offsets on all three brokers: one can be lost.
  state.cluster = await KafkaCluster.start(PORT, 3, 3);
  state.kafka = new Kafka({
    clientId: 'multi-broker-suite',
    brokers: state.cluster.brokers,
    logLevel: logLevel.NOTHING,
    retry: { retries: 8, initialRetryTime: 200 },
  });
  state.admin = state.kafka.admin();
  await state.admin.connect();
}, 240_000);

afterAll(async () => {
  await ReplicaProcess.killAll();
  await state.admin?.disconnect();
  await state.cluster?.close();
  if (state.work) await fsp.rm(state.work, { recursive: true, force: true });
}, 120_000);

test('partitions led by three brokers: a replica SIGKILLed and restarted on its data directory, every record once', async () => {
  const lanceDir = path.join(suite.work, 'lance');
  const { topic, groupId, file } = await topicAndConsumer(suite, 6, {
    lance: { uri: lanceDir },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  await untilHosted(suite.admin, topic, 6);
  const leaders = new Set(
    (await suite.admin.fetchTopicMetadata({ topics: [topic] })).topics[0]!.partitions.map((p) => p.leader),
  );
  expect(leaders.size).toBe(3);

  const brokers = state.cluster!.brokers;
  const dataDir = (label: string) => fsp.mkdtemp(path.join(suite.work, `data-${label}-`));
  const produced = await produceRecords(suite.kafka, topic, 6, 12_000);
  const dirA = await dataDir('A');
  const a: Named = { label: 'A', process: new ReplicaProcess(file, dirA, brokers) };
  const b: Named = { label: 'B', process: new ReplicaProcess(file, await dataDir('B'), brokers) };
  await waitForJoin(a.process, 0, (j) => assignedOf(j).length > 0);
  await sleep(200 + Math.floor(Math.random() * 1_300));
  expect(await a.process.kill('SIGKILL')).toEqual({ code: null, signal: 'SIGKILL' });
  produced.push(...(await produceRecords(suite.kafka, topic, 6, 6_000, undefined, 12_000)));
  // Restarted on its own data directory (a pod with its volume): what it staged and committed
  // before the kill is published from there.
  const a2: Named = { label: 'A2', process: new ReplicaProcess(file, dirA, brokers) };

  await finishFaultRun(suite.admin, { groupId, topic, lanceDir }, [a2, b], produced, {
    quietMs: 3_000,
    alsoRan: [a],
  });
}, 300_000);

test('a broker SIGKILLed while two replicas consume (its leaders, maybe the group coordinator, move) and started again: every record once', async () => {
  const lanceDir = path.join(suite.work, 'lance-failover');
  const { topic, groupId, file } = await topicAndConsumer(suite, 6, {
    lance: { uri: lanceDir },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  await untilHosted(suite.admin, topic, 6);
  const cluster = state.cluster!;
  const lost = cluster.ports[2]!;
  const brokers = cluster.brokers;
  const dataDir = (label: string) => fsp.mkdtemp(path.join(suite.work, `failover-${label}-`));
  const produced = await produceRecords(suite.kafka, topic, 6, 30_000);
  const a: Named = { label: 'A', process: new ReplicaProcess(file, await dataDir('A'), brokers) };
  const b: Named = { label: 'B', process: new ReplicaProcess(file, await dataDir('B'), brokers) };
  // Both in the group holding partitions (one may have consumed the backlog before the other joined).
  await waitForJoin(a.process, 0, (j) => assignedOf(j).length > 0);
  await waitForJoin(b.process, 0, (j) => assignedOf(j).length > 0);
  await cluster.crash(lost);
  // Once the controller's broker session (9 s) ends, the lost broker is fenced and its leaders move.
  await until(
    'the lost broker led no partition',
    async () => {
      // The test's own admin may meet the lost broker's connection reset: asked again.
      const metadata = await suite.admin.fetchTopicMetadata({ topics: [topic] }).catch(() => undefined);
      const partitions = metadata?.topics[0]?.partitions ?? [];
      return partitions.length === 6 && partitions.every((p) => p.leader !== 3 && p.leader >= 0)
        ? true
        : undefined;
    },
    90_000,
    500,
  );
  produced.push(...(await produceRecords(suite.kafka, topic, 6, 3_000, undefined, 30_000)));
  await cluster.restart(lost);
  produced.push(...(await produceRecords(suite.kafka, topic, 6, 3_000, undefined, 33_000)));

  await finishFaultRun(suite.admin, { groupId, topic, lanceDir }, [a, b], produced, { quietMs: 3_000 });
}, 300_000);
