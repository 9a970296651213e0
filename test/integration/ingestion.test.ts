import {
  expectExactlyProduced,
  produceRecords,
  publishable,
  readStaged,
  waitForCommittedAtEnd,
  type Produced,
} from '../support/ingestion-fixture';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { testBrokers, uniqueName } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';

/**
 * Ingestion against the real broker, with replicas run as real processes through
 * `bin/kafka-lance run`. Exactly-once is checked on what the ceiling rule lets each
 * replica publish: rows of an ownership epoch in [start, ceiling) per partition.
 */
const suite = brokerSuite('kl-ingest');
const { kafka } = suite;

/** Staging is what these tests read: publication (which deletes published parts) is tested apart. */
const setup = (partitions: number, extra: Record<string, unknown> = {}) =>
  topicAndConsumer(suite, partitions, {
    staging: { maxPartBytes: 8 * 1024 * 1024, maxPartAgeMs: 1_000 },
    materializer: { enabled: false },
    ...extra,
  });

const dataDir = async (label: string) => tempDir(`kl-${label}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const randomBetween = (lo: number, hi: number) => lo + Math.floor(Math.random() * (hi - lo));

/** Produces in the background, in slices, so that replicas are killed mid-stream. */
function produceInBackground(
  topic: string,
  partitions: number,
  total: number,
  slices: number,
  pauseMs = 150,
) {
  const produced: Produced[] = [];
  const done = (async () => {
    const per = Math.ceil(total / slices);
    for (let start = 0; start < total; start += per) {
      produced.push(
        ...(await produceRecords(kafka, topic, partitions, Math.min(per, total - start), undefined, start)),
      );
      await sleep(pauseMs);
    }
  })();
  return { produced, done };
}

test('200,000 JSON records over 6 partitions are staged exactly once, and committed offsets equal the log end', async () => {
  const { topic, groupId, file } = await setup(6);
  const produced = await produceRecords(kafka, topic, 6, 200_000);
  const dir = await dataDir('200k');
  const replica = new ReplicaProcess(file, dir, testBrokers());
  const joined = Date.now();
  await replica.waitForEvent('kafka.join');
  await waitForCommittedAtEnd(suite.admin, groupId, topic);
  const seconds = (Date.now() - joined) / 1000;
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  const rows = await readStaged([dir], 'logs');
  expect(rows).toHaveLength(200_000); // a clean run cuts nothing
  expectExactlyProduced(rows, produced);
  const { kept, unknown } = await publishable(suite.admin, groupId, topic, rows);
  expect(unknown).toEqual([]);
  expect(kept).toHaveLength(200_000);
  const ends = await suite.admin.fetchTopicOffsets(topic);
  const [committed] = await suite.admin.fetchOffsets({ groupId, topics: [topic] });
  for (const e of ends)
    expect(committed!.partitions.find((p) => p.partition === e.partition)!.offset).toBe(e.high);
  console.log(`200,000 records staged and committed in ${seconds.toFixed(1)} s (including the group join)`);
});

test('a replica SIGKILLed three times during ingestion and restarted on the same data directory stages every record exactly once', async () => {
  const { topic, groupId, file } = await setup(6);
  const dir = await dataDir('kill3');
  // About 30 s of production: every kill lands while records are still flowing.
  const producing = produceInBackground(topic, 6, 120_000, 30, 1_000);
  const kills: string[] = [];
  for (let i = 0; i < 3; i++) {
    const replica = new ReplicaProcess(file, dir, testBrokers());
    await replica.waitForEvent('kafka.join');
    const wait = randomBetween(200, 2_500);
    await sleep(wait);
    const exit = await replica.kill('SIGKILL');
    expect(exit.signal).toBe('SIGKILL');
    kills.push(`${wait} ms after join`);
  }
  const final = new ReplicaProcess(file, dir, testBrokers());
  await producing.done;
  await waitForCommittedAtEnd(suite.admin, groupId, topic);
  expect(await final.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  const rows = await readStaged([dir], 'logs');
  const { kept, unknown } = await publishable(suite.admin, groupId, topic, rows);
  expect(unknown).toEqual([]);
  expectExactlyProduced(kept, producing.produced);
  console.log(`killed at ${kills.join(', ')}: ${rows.length} rows staged, ${kept.length} publishable`);
});

test('two replicas in one group, one killed mid-stream and restarted later: what both may publish is exactly the produced set', async () => {
  const { topic, groupId, file } = await setup(6);
  const dirA = await dataDir('two-a');
  const dirB = await dataDir('two-b');
  const producing = produceInBackground(topic, 6, 100_000, 25);
  let a = new ReplicaProcess(file, dirA, testBrokers());
  const b = new ReplicaProcess(file, dirB, testBrokers());
  await a.waitForEvent('kafka.join');
  await b.waitForEvent('kafka.join');
  await sleep(randomBetween(500, 2_000));
  const bFrom = b.logs.length;
  expect((await a.kill('SIGKILL')).signal).toBe('SIGKILL');
  // B takes A's partitions once A's session times out (6 s); A comes back after that.
  await b.waitFor(
    (l) => l.event === 'kafka.join' && b.logs.indexOf(l) >= bFrom && (l.assigned as unknown[]).length === 6,
    60_000,
  );
  a = new ReplicaProcess(file, dirA, testBrokers());
  await a.waitFor((l) => l.event === 'kafka.join' && (l.assigned as unknown[]).length > 0, 60_000);
  await producing.done;
  // Records produced once the restarted A holds partitions: both data directories stage some
  // (on a loaded machine the background production could end before A is back).
  producing.produced.push(...(await produceRecords(kafka, topic, 6, 6_000, undefined, 100_000)));
  await waitForCommittedAtEnd(suite.admin, groupId, topic);
  expect(await a.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  expect(await b.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  const rows = await readStaged([dirA, dirB], 'logs');
  const { kept, unknown } = await publishable(suite.admin, groupId, topic, rows);
  expect(unknown).toEqual([]);
  expectExactlyProduced(kept, producing.produced);
  expect(new Set(kept.map((r) => r.dataDir)).size).toBe(2);
});

test('an ambiguous commit: the ownership chain in the offset metadata gives the restarted replica the right ceiling', async () => {
  const { topic, groupId, file } = await setup(4);
  const dirA = await dataDir('amb-a');
  const dirB = await dataDir('amb-b');
  const producing = produceInBackground(topic, 4, 60_000, 30);
  // A dies at the instant its 5th data commit is answered, before it records it.
  const a = new ReplicaProcess(file, dirA, testBrokers(), { KAFKA_LANCE_TEST_KILL_AT_COMMIT: '5' });
  await a.waitForEvent('kafka.join');
  const b = new ReplicaProcess(file, dirB, testBrokers());
  expect((await a.exited).signal).toBe('SIGKILL');
  const ownerA = a.logs.find((l) => l.event === 'replica.start')!.owner as string;
  // B takes every partition and commits past A's last commit.
  await b.waitFor((l) => l.event === 'kafka.join' && (l.claimed as unknown[]).length === 4, 60_000);
  await sleep(1_000);
  const restarted = new ReplicaProcess(file, dirA, testBrokers());
  await restarted.waitForEvent('kafka.join');
  await producing.done;
  await waitForCommittedAtEnd(suite.admin, groupId, topic);
  expect(await restarted.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  expect(await b.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  const rows = await readStaged([dirA, dirB], 'logs');
  const { kept, unknown, chains } = await publishable(suite.admin, groupId, topic, rows);
  expect(unknown).toEqual([]);
  expectExactlyProduced(kept, producing.produced);
  // A's first epoch is in every partition's chain, followed by B's: its ceiling came from Kafka, not from A.
  for (const { chain } of chains.values()) {
    const i = chain.findIndex((e) => e.owner === ownerA);
    expect(i).toBeGreaterThanOrEqual(0);
    expect(chain[i + 1]).toBeDefined();
  }
  expect(rows.some((r) => r.owner === ownerA)).toBe(true);
});

test('bad input goes to the dead-letter topic with its reason, and the good records around it are staged', async () => {
  const dlq = uniqueName('dlq');
  const { topic, groupId, file } = await setup(1, {
    deadLetter: { topic: dlq },
    maxRecordBytes: 1024 * 1024,
  });
  await suite.admin.createTopics({ topics: [{ topic: dlq, numPartitions: 1 }], waitForLeaders: true });
  const good = (n: number) => JSON.stringify({ n, service: 'svc', level: 'info', message: `good ${n}` });
  const corpus: { value: Buffer | null; reason?: string }[] = [
    { value: Buffer.from(good(0)) },
    { value: Buffer.from('{"n": 1, "service": '), reason: 'kafka-lance.invalid-json' },
    { value: Buffer.from(good(2)) },
    {
      value: Buffer.from([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xe2, 0x82]),
      reason: 'kafka-lance.invalid-utf8',
    },
    { value: Buffer.from(good(4)) },
    { value: Buffer.from(JSON.stringify({ n: 5, service: 42 })), reason: 'kafka-lance.schema-mismatch' },
    { value: Buffer.from(good(6)) },
    { value: Buffer.alloc(5 * 1024 * 1024, 0x61), reason: 'kafka-lance.too-large' },
    { value: Buffer.from(good(8)) },
    { value: Buffer.alloc(0), reason: 'kafka-lance.invalid-json' },
    { value: Buffer.from(good(10)) },
    { value: null, reason: 'kafka-lance.tombstone' },
    { value: Buffer.from(good(12)) },
    { value: Buffer.from(`${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}`), reason: 'deep' },
    { value: Buffer.from(good(14)) },
  ];
  const producer = kafka.producer({ maxInFlightRequests: 1 });
  await producer.connect();
  for (const c of corpus) await producer.send({ topic, acks: -1, messages: [{ value: c.value, key: 'k' }] });
  await producer.disconnect();

  const dir = await dataDir('dlq');
  const replica = new ReplicaProcess(file, dir, testBrokers());
  await waitForCommittedAtEnd(suite.admin, groupId, topic);
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  const staged = await readStaged([dir], 'logs');
  const goodOffsets = corpus.flatMap((c, i) => (c.reason ? [] : [i]));
  expect(staged.map((r) => r.offset).sort((x, y) => x - y)).toEqual(goodOffsets);
  for (const r of staged) expect(r.message).toBe(`good ${r.offset}`);

  const letters = await readTopic(dlq, corpus.length - goodOffsets.length);
  const byOffset = new Map(letters.map((l) => [Number(l.headers['__connect.errors.offset']), l]));
  expect(byOffset.size + staged.length).toBe(corpus.length);
  corpus.forEach((c, i) => {
    if (!c.reason) return expect(byOffset.has(i)).toBe(false);
    const letter = byOffset.get(i)!;
    expect(letter.headers['__connect.errors.topic']).toBe(topic);
    expect(letter.headers['__connect.errors.exception.message']!.length).toBeGreaterThan(0);
    if (c.reason === 'deep') {
      expect(['kafka-lance.invalid-json', 'kafka-lance.schema-mismatch']).toContain(
        letter.headers['__connect.errors.exception.class.name'],
      );
    } else {
      expect(letter.headers['__connect.errors.exception.class.name']).toBe(c.reason);
    }
    // The raw bytes are kept as they were produced.
    expect(letter.value === null ? null : letter.value.equals(c.value ?? Buffer.alloc(0))).toBe(
      c.value === null ? null : true,
    );
  });
});

async function readTopic(topic: string, count: number) {
  const consumer = kafka.consumer({ groupId: uniqueName('dlq-reader') });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  const out: { value: Buffer | null; headers: Record<string, string> }[] = [];
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`only ${out.length} of ${count} dead letters arrived`)),
      60_000,
    );
    void consumer.run({
      eachMessage: async ({ message }) => {
        const headers = Object.fromEntries(
          Object.entries(message.headers ?? {}).map(([k, v]) => [
            k,
            Buffer.isBuffer(v) ? v.toString() : String(v),
          ]),
        );
        out.push({ value: message.value, headers });
        if (out.length >= count) {
          clearTimeout(timer);
          resolve();
        }
        return Promise.resolve();
      },
    });
  });
  await consumer.disconnect();
  return out;
}
