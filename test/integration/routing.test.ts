import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { ensureTopicsServed } from '../../src/kafka/protocol/topic-ready';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { brokerSuite } from '../support/broker-suite';
import {
  expectExactlyProduced,
  logValue,
  produceRecords,
  publishable,
  readStaged,
  waitForCommittedAtEnd,
  type Produced,
} from '../support/ingestion-fixture';
import { testBrokers, uniqueName } from '../support/kafka';
import { tempDir } from '../support/rows';

/**
 * Routing against the real broker, with the replica run as a real process: topics
 * found by pattern (those created while it runs included) and records split into tables
 * by a `{topic}` template or a route. What is read back is what each table STAGED
 * (`<dataDir>/staging/<table>/`) and the group's committed offsets: the materializer
 * is off, so that the parts stay on disk to be read.
 */
const suite = brokerSuite('kl-routing');
const { kafka } = suite;

const LOG_FIELDS = {
  n: { type: 'int64', nullable: false },
  level: 'string',
  service: { type: 'string', nullable: false },
  message: 'string',
};

/** A TypeScript definition (a route is code): `body` is spliced into the object. */
async function writeDefinition(name: string, body: string): Promise<string> {
  const file = path.join(suite.work, `${name}.ts`);
  await fsp.writeFile(
    file,
    `export default {
  name: ${JSON.stringify(name)},
  schema: { fields: ${JSON.stringify(LOG_FIELDS)} },
  deadLetter: { file: ${JSON.stringify(path.join(suite.work, `${name}.dlq.jsonl`))} },
  durabilityIntervalMs: 200,
  sessionTimeoutMs: 6_000,
  heartbeatIntervalMs: 500,
  workers: 1,
  staging: { maxPartBytes: 8 * 1024 * 1024, maxPartAgeMs: 1_000 },
  materializer: { enabled: false },
  ${body}
};
`,
  );
  return file;
}

const groupOf = (name: string) => `kafka-lance-${name}`;

async function readDeadLetters(
  name: string,
): Promise<{ offset: number; partition: number; reason: string; detail: string }[]> {
  const text = await fsp.readFile(path.join(suite.work, `${name}.dlq.jsonl`), 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { offset: number; partition: number; reason: string; detail: string });
}

test('a pattern that matches no topic at start picks up each matching topic created while the replica runs, every record once in its own table', async () => {
  const prefix = uniqueName('orders').replace(/[^A-Za-z0-9-]/g, '');
  const name = uniqueName('route-pattern').replace(/[^A-Za-z0-9_-]/g, '');
  const file = await writeDefinition(
    name,
    `topics: [{ pattern: ${JSON.stringify(`^${prefix}\\..+$`)} }],
  table: 'cdc_{topic}',
  topicRefreshMs: 1_000,`,
  );
  const dir = await tempDir('kl-route-pattern');
  const replica = new ReplicaProcess(file, dir, testBrokers());
  // Nothing matches yet: the start goes on and says so.
  await replica.waitFor((l) => l.event === 'kafka.subscription.empty');

  const produced = new Map<string, Produced[]>();
  for (const [i, suffix] of ['eu', 'us'].entries()) {
    const topic = `${prefix}.${suffix}`;
    await ensureTopicsServed(suite.admin, [{ topic, numPartitions: 2 }]);
    // Written before the replica can know of the topic: read from the earliest offset.
    produced.set(topic, await produceRecords(kafka, topic, 2, 500, logValue, i * 1_000));
    await replica.waitFor(
      (l) =>
        l.event === 'kafka.subscription.changed' &&
        (l.added as string[] | undefined)?.includes(topic) === true,
    );
    produced.get(topic)!.push(...(await produceRecords(kafka, topic, 2, 500, logValue, i * 1_000 + 500)));
    await waitForCommittedAtEnd(suite.admin, groupOf(name), topic);
  }
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  for (const [topic, records] of produced) {
    const rows = await readStaged([dir], `cdc_${topic}`);
    expect(rows).toHaveLength(1_000);
    expectExactlyProduced(rows, records);
  }
  expect((await fsp.readdir(path.join(dir, 'staging'))).sort()).toEqual(
    [...produced.keys()].map((t) => `cdc_${t}`).sort(),
  );
});

test('a route splits one topic into three tables: every record once, in the table of its level', async () => {
  const topic = uniqueName('route-split');
  const name = uniqueName('route-split').replace(/[^A-Za-z0-9_-]/g, '');
  await ensureTopicsServed(suite.admin, [{ topic, numPartitions: 3 }]);
  const file = await writeDefinition(
    name,
    `topics: [${JSON.stringify(topic)}],
  route: (r: { value: Buffer | null }) => 'logs_' + JSON.parse(r.value!.toString()).level,`,
  );
  const produced = await produceRecords(kafka, topic, 3, 3_000);
  const dir = await tempDir('kl-route-split');
  const replica = new ReplicaProcess(file, dir, testBrokers());
  await waitForCommittedAtEnd(suite.admin, groupOf(name), topic);
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  for (const level of ['info', 'warn', 'error']) {
    const rows = await readStaged([dir], `logs_${level}`);
    const expected = produced.filter((p) => (JSON.parse(p.value) as { level: string }).level === level);
    expect(rows).toHaveLength(1_000);
    expectExactlyProduced(rows, expected);
  }
  expect(await readDeadLetters(name)).toEqual([]);
});

test('a route that names an invalid table makes those records dead letters (invalid-table); nothing is lost', async () => {
  const topic = uniqueName('route-invalid');
  const name = uniqueName('route-invalid').replace(/[^A-Za-z0-9_-]/g, '');
  await ensureTopicsServed(suite.admin, [{ topic, numPartitions: 2 }]);
  const file = await writeDefinition(
    name,
    `topics: [${JSON.stringify(topic)}],
  route: (r: { value: Buffer | null }) => {
    const n = JSON.parse(r.value!.toString()).n;
    if (n % 10 === 0) return '../escaped_' + n;
    if (n % 10 === 5) throw new Error('no table for ' + n);
    return 'kept';
  },`,
  );
  const produced = await produceRecords(kafka, topic, 2, 2_000);
  const dir = await tempDir('kl-route-invalid');
  const replica = new ReplicaProcess(file, dir, testBrokers());
  await waitForCommittedAtEnd(suite.admin, groupOf(name), topic);
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  const nOf = (p: Produced) => (JSON.parse(p.value) as { n: number }).n;
  const routed = produced.filter((p) => nOf(p) % 5 !== 0);
  const refused = produced.filter((p) => nOf(p) % 5 === 0);
  expectExactlyProduced(await readStaged([dir], 'kept'), routed);
  const letters = await readDeadLetters(name);
  expect(letters.map((l) => `${l.partition}:${l.offset}`).sort()).toEqual(
    refused.map((p) => `${p.partition}:${p.offset}`).sort(),
  );
  expect(new Set(letters.map((l) => l.reason))).toEqual(new Set(['invalid-table']));
  expect(letters.some((l) => /"\.\.\/escaped_\d+"/.test(l.detail))).toBe(true);
  expect(letters.some((l) => /threw: no table for \d+/.test(l.detail))).toBe(true);
  // Nothing escaped the staging directory.
  expect(await fsp.readdir(path.join(dir, 'staging'))).toEqual(['kept']);
  expect(await fsp.readdir(dir)).not.toContain('escaped_0');
});

test('a topic a pattern matched that is deleted while the replica runs is let go: the other matching topic goes on being consumed', async () => {
  const prefix = uniqueName('tenant').replace(/[^A-Za-z0-9-]/g, '');
  const name = uniqueName('route-deleted').replace(/[^A-Za-z0-9_-]/g, '');
  const [kept, deleted] = [`${prefix}.kept`, `${prefix}.deleted`];
  await ensureTopicsServed(suite.admin, [
    { topic: kept, numPartitions: 2 },
    { topic: deleted, numPartitions: 2 },
  ]);
  const file = await writeDefinition(
    name,
    `topics: [{ pattern: ${JSON.stringify(`^${prefix}\\.`)} }],
  table: '{topic}',
  topicRefreshMs: 1_000,`,
  );
  const produced = await produceRecords(kafka, kept, 2, 500);
  await produceRecords(kafka, deleted, 2, 500);
  const dir = await tempDir('kl-route-deleted');
  const replica = new ReplicaProcess(file, dir, testBrokers());
  await waitForCommittedAtEnd(suite.admin, groupOf(name), kept);
  await waitForCommittedAtEnd(suite.admin, groupOf(name), deleted);

  await suite.admin.deleteTopics({ topics: [deleted] });
  await replica.waitFor(
    (l) =>
      l.event === 'kafka.subscription.changed' &&
      (l.removed as string[] | undefined)?.includes(deleted) === true,
  );
  produced.push(...(await produceRecords(kafka, kept, 2, 500, logValue, 500)));
  await waitForCommittedAtEnd(suite.admin, groupOf(name), kept);
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  const rows = await readStaged([dir], kept);
  expect(rows).toHaveLength(1_000);
  expectExactlyProduced(rows, produced);
});

test('a route into three tables, the replica SIGKILLed twice mid-stream and restarted on its data directory: what each table may publish is exactly its records', async () => {
  const topic = uniqueName('route-kill');
  const name = uniqueName('route-kill').replace(/[^A-Za-z0-9_-]/g, '');
  await ensureTopicsServed(suite.admin, [{ topic, numPartitions: 3 }]);
  const file = await writeDefinition(
    name,
    `topics: [${JSON.stringify(topic)}],
  route: (r: { value: Buffer | null }) => 'logs_' + JSON.parse(r.value!.toString()).level,`,
  );
  const dir = await tempDir('kl-route-kill');
  const produced: Produced[] = [];
  const producing = (async () => {
    for (let slice = 0; slice < 20; slice++) {
      produced.push(...(await produceRecords(kafka, topic, 3, 2_000, logValue, slice * 2_000)));
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
  for (let i = 0; i < 2; i++) {
    const replica = new ReplicaProcess(file, dir, testBrokers());
    await replica.waitForEvent('kafka.join');
    await new Promise((r) => setTimeout(r, 500 + Math.floor(Math.random() * 2_000)));
    expect((await replica.kill('SIGKILL')).signal).toBe('SIGKILL');
  }
  const final = new ReplicaProcess(file, dir, testBrokers());
  await producing;
  // Its own stop is the graceful one under test: the earlier replicas may have committed
  // everything already, and a SIGTERM before Node has run the bin's first line is death by signal.
  await final.waitForEvent('kafka.join');
  await waitForCommittedAtEnd(suite.admin, groupOf(name), topic);
  expect(await final.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  for (const level of ['info', 'warn', 'error']) {
    const rows = await readStaged([dir], `logs_${level}`);
    const { kept, unknown } = await publishable(suite.admin, groupOf(name), topic, rows);
    expect(unknown).toEqual([]);
    expectExactlyProduced(
      kept,
      produced.filter((p) => (JSON.parse(p.value) as { level: string }).level === level),
    );
  }
});
