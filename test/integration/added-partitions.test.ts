import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { brokerSuite, topicAndConsumer, untilHosted } from '../support/broker-suite';
import { checkFaultRun, settle, waitForJoin, assignedOf, type Named } from '../support/faults';
import { produceRecords } from '../support/ingestion-fixture';
import { testBrokers, uniqueName } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';

/**
 * Partitions added to a live topic: a replica started when the topic had one partition
 * claims the added one, later, from the commit another member made. A claim reads the
 * group's commits through kafkajs's admin client, and a partition missing from that
 * answer must never read as "no commit" (the claim would start it over, overwrite the
 * other member's commit and chain, and stage its records twice). A replica's admin keeps
 * its topic metadata for 30 s (src/kafka/protocol/admin-metadata.ts; kafkajs's own read
 * it again before every call), so its partition list can lag the topic: claims ask for
 * exact partitions and ask a fresh admin for any the answer omits, an omission still there
 * being an error (test/kafka/partition-offsets.test.ts), and the ownership reads, which
 * the publications of the added partition wait on, name no topics and so look up no
 * partition list. Real broker, real replica processes (run after `npm run build`).
 */
const suite = brokerSuite('kl-added-partitions');

test('a partition added to a live topic is claimed from its committed offset by a replica whose metadata predates it', async () => {
  const lanceDir = path.join(suite.work, `${uniqueName('added')}-lance`);
  const { topic, groupId, file } = await topicAndConsumer(suite, 1, {
    lance: { uri: lanceDir },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const dataDir = (label: string) => fsp.mkdtemp(path.join(suite.work, `data-${label}-`));
  const a: Named = { label: 'A', process: new ReplicaProcess(file, await dataDir('A'), testBrokers()) };
  await waitForJoin(a.process, 0, (j) => assignedOf(j).length === 1);
  const produced = await produceRecords(suite.kafka, topic, 1, 300);
  expect(
    (await settle(suite.admin, groupId, topic, lanceDir, produced.length, { quietMs: 3_000 })).problems,
  ).toEqual([]);

  // A's metadata knows one partition. A second one appears and gets records.
  await suite.admin.createPartitions({ topicPartitions: [{ topic, count: 2 }] });
  await untilHosted(suite.admin, topic, 2);
  produced.push(...(await produceRecords(suite.kafka, topic, 2, 600, undefined, 300)));

  // B joins: the leader refreshes its metadata and both partitions are assigned; whoever
  // gets partition 1 claims and commits it.
  const b: Named = { label: 'B', process: new ReplicaProcess(file, await dataDir('B'), testBrokers()) };
  await waitForJoin(b.process, 0, () => true);
  expect(
    (await settle(suite.admin, groupId, topic, lanceDir, produced.length, { quietMs: 3_000 })).problems,
  ).toEqual([]);

  // B leaves: A is assigned both partitions and claims partition 1 from its commit.
  const from = a.process.logs.length;
  const exitB = await b.process.kill('SIGTERM');
  await waitForJoin(a.process, from, (j) => assignedOf(j).length === 2);
  produced.push(...(await produceRecords(suite.kafka, topic, 2, 200, undefined, 900)));
  const settled = await settle(suite.admin, groupId, topic, lanceDir, produced.length, { quietMs: 8_000 });
  const exitA = await a.process.kill('SIGTERM');
  const report = await checkFaultRun({
    admin: suite.admin,
    groupId,
    topic,
    lanceDir,
    produced,
    replicas: [a, b],
    problems: [
      ...settled.problems,
      ...[exitA, exitB].filter((e) => e.code !== 0).map((e) => `a replica exited ${JSON.stringify(e)}`),
    ],
  });
  expect(report.problems).toEqual([]);
});
