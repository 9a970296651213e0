import * as lancedb from '@lancedb/lancedb';
import { CompressionCodecs, CompressionTypes } from 'kafkajs';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { sleep, until } from '../support/faults';
import {
  ensureKcat,
  foreignValues,
  produceWithJava,
  produceWithKcat,
  sha256,
  type ProducerCodec,
} from '../support/foreign-producers';
import { logValue, produceRecords, waitForCommittedAtEnd, writeConsumer } from '../support/ingestion-fixture';
import { testBrokers, testKafka, uniqueName } from '../support/kafka';
import { runBounded } from '../support/run-bounded';
import { kafkajsCodec, registerCompressionCodecs } from '../../src/kafka/protocol/compression';
import { zstdCodec } from '../../src/kafka/protocol/compression/zstd';
import { ensureTopicsServed } from '../../src/kafka/protocol/topic-ready';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { openTableIfCommitted } from '../../src/lance/open-if-committed';

/**
 * Compressed topics as production writes them, by producers nobody here wrote: the Java
 * producer (xerial-framed snappy, Kafka's LZ4 frames of 64 KiB blocks, zstd-jni frames
 * without a content size) and librdkafka's (kcat: raw snappy blocks, LZ4F frames, zstd),
 * each codec, a partition whose producers changed codec mid-stream, and a topic whose
 * broker recompresses what it is sent (`compression.type`). One real replica reads
 * them all into one real Lance table (`format: raw`, so each row keeps the value's
 * bytes): every record lands once, its value byte for byte (hashes) what was produced.
 * Run after `npm run build`.
 */
const suite = brokerSuite('kl-codecs');
const CODECS = ['gzip', 'snappy', 'lz4', 'zstd'] as const;
const PER_PRODUCER = 1_500;
const MIXED: readonly [ProducerCodec, 'java' | 'kcat'][] = [
  ['gzip', 'java'],
  ['snappy', 'kcat'],
  ['lz4', 'java'],
  ['zstd', 'kcat'],
  ['none', 'java'],
  ['snappy', 'java'],
  ['lz4', 'kcat'],
];
const PER_MIXED_RUN = 300;

interface Row {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly value: string;
}

async function tableRows(lanceDir: string): Promise<Row[]> {
  const db = await lancedb.connect(lanceDir);
  try {
    const opened = await openTableIfCommitted(db, 'events');
    if (!opened) return [];
    const rows = await opened.query().select(['_topic', '_partition', '_offset', 'value']).toArray();
    return rows.map((r: Record<string, unknown>) => ({
      topic: String(r._topic),
      partition: Number(r._partition),
      offset: Number(r._offset),
      value: sha256(r.value as Uint8Array),
    }));
  } finally {
    db.close();
  }
}

async function rowCount(lanceDir: string): Promise<number> {
  const db = await lancedb.connect(lanceDir);
  try {
    const opened = await openTableIfCommitted(db, 'events');
    if (!opened) return 0;
    return await opened.countRows();
  } finally {
    db.close();
  }
}

beforeAll(() => ensureKcat());

const BIN = path.resolve(__dirname, '../../bin/kafka-lance');
const OWN_RECORDS = 2_000;

/**
 * Reads a topic with a kafkajs consumer whose zstd codec counts its calls: how many
 * record batches were zstd-compressed, once `records` records came back.
 */
async function zstdBatchesIn(topic: string, records: number): Promise<number> {
  const checked = kafkajsCodec('zstd', zstdCodec);
  let batches = 0;
  (CompressionCodecs as Record<number, () => unknown>)[CompressionTypes.ZSTD] = () => ({
    compress: checked.compress,
    decompress: (compressed: Buffer) => {
      batches += 1;
      return checked.decompress(compressed);
    },
  });
  const consumer = testKafka().consumer({ groupId: uniqueName('zstd-check') });
  let seen = 0;
  try {
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({
      eachMessage: () => {
        seen += 1;
        return Promise.resolve();
      },
    });
    await until(`${records} records of ${topic}`, () => (seen >= records ? true : undefined), 60_000);
  } finally {
    await consumer.disconnect();
  }
  return batches;
}

test('topics written by the Java producer and by librdkafka with every codec, codecs changing within a partition, and a broker that recompresses land in one table: every record once, each value byte for byte', async () => {
  const brokers = testBrokers();
  const produced = new Map<string, string[]>(); // topic → value hashes
  const note = (topic: string, values: readonly string[]) =>
    produced.set(topic, [...(produced.get(topic) ?? []), ...values.map((v) => sha256(v))]);

  const perCodec = CODECS.map((codec) => ({ codec, topic: uniqueName(`codec-${codec}`) }));
  const mixed = uniqueName('codec-mixed');
  const recompressed = uniqueName('codec-recompressed');
  await ensureTopicsServed(suite.admin, [
    ...perCodec.map(({ topic }) => ({ topic, numPartitions: 2 })),
    { topic: mixed, numPartitions: 1 },
    // The broker writes zstd whatever the producers send (lz4, snappy, none).
    { topic: recompressed, numPartitions: 1, configEntries: [{ name: 'compression.type', value: 'zstd' }] },
  ]);

  for (const { codec, topic } of perCodec) {
    const java = foreignValues(`java-${codec}`, PER_PRODUCER);
    produceWithJava(brokers, topic, codec, java);
    const kcat = foreignValues(`kcat-${codec}`, PER_PRODUCER);
    produceWithKcat(brokers, topic, codec, kcat);
    note(topic, [...java, ...kcat]);
  }
  // One partition, its producer's codec changing from run to run.
  MIXED.forEach(([codec, producer], i) => {
    const values = foreignValues(`mixed-${i}-${producer}-${codec}`, PER_MIXED_RUN);
    (producer === 'java' ? produceWithJava : produceWithKcat)(brokers, mixed, codec, values);
    note(mixed, values);
  });
  for (const [codec, producer] of [
    ['lz4', 'java'],
    ['snappy', 'kcat'],
    ['none', 'kcat'],
  ] as const) {
    const values = foreignValues(`recompressed-${producer}-${codec}`, PER_MIXED_RUN);
    (producer === 'java' ? produceWithJava : produceWithKcat)(brokers, recompressed, codec, values);
    note(recompressed, values);
  }
  // kafka-lance's own producer (`produce --compression zstd`): its values are its own, so counted, not hashed.
  const ownTopic = uniqueName('codec-own-zstd');
  const own = runBounded(process.execPath, [
    BIN,
    'produce',
    '--topic',
    ownTopic,
    '--count',
    String(OWN_RECORDS),
    '--partitions',
    '1',
    '--compression',
    'zstd',
    '--brokers',
    brokers.join(','),
  ]);
  expect(own.stderr).not.toMatch(/error/i);
  expect(own.status).toBe(0);
  expect(await zstdBatchesIn(ownTopic, OWN_RECORDS)).toBeGreaterThan(0);
  const topics = [...produced.keys(), ownTopic];
  const total = [...produced.values()].reduce((n, v) => n + v.length, 0) + OWN_RECORDS;

  const lanceDir = path.join(suite.work, 'lance');
  const name = uniqueName('codecs').replace(/[^A-Za-z0-9_-]/g, '');
  const file = await writeConsumer(suite.work, {
    name,
    topics,
    table: 'events',
    format: 'raw',
    schema: 'infer',
    lance: { uri: lanceDir },
    fromBeginning: true,
    deadLetter: { file: path.join(suite.work, `${name}.dlq.jsonl`) },
    errors: { tolerance: 'none' },
    durabilityIntervalMs: 200,
    staging: { maxPartBytes: 4 * 1024 * 1024, maxPartAgeMs: 500 },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
    sessionTimeoutMs: 6_000,
    heartbeatIntervalMs: 500,
    workers: 2,
  });
  const dataDir = await fsp.mkdtemp(path.join(suite.work, 'data-'));
  const replica = new ReplicaProcess(file, dataDir, brokers);
  for (const topic of topics) await waitForCommittedAtEnd(suite.admin, `kafka-lance-${name}`, topic);
  await until(
    `${total} rows in the table`,
    async () => ((await rowCount(lanceDir)) >= total ? true : undefined),
    90_000,
    500,
  );
  await sleep(1_000); // a late duplicate would show below
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  const problems = replica.logs
    .filter((l) => l.level >= 50 || l.event === 'dead-letter' || l.event === 'partition.stopped')
    .map((l) => `${l.event ?? ''} ${l.msg ?? ''}`);
  expect(problems).toEqual([]);
  const rows = await tableRows(lanceDir);
  const keys = new Set(rows.map((r) => `${r.topic}/${r.partition}/${r.offset}`));
  expect({ rows: rows.length, distinct: keys.size }).toEqual({ rows: total, distinct: total });
  expect(rows.filter((r) => r.topic === ownTopic)).toHaveLength(OWN_RECORDS);
  for (const topic of produced.keys()) {
    const ends = await suite.admin.fetchTopicOffsets(topic);
    const landed = rows.filter((r) => r.topic === topic);
    expect({ topic, rows: landed.length }).toEqual({
      topic,
      rows: ends.reduce((n, e) => n + Number(e.high), 0),
    });
    expect({ topic, hashes: landed.map((r) => r.value).sort() }).toEqual({
      topic,
      hashes: [...produced.get(topic)!].sort(),
    });
  }
});

test("a kafkajs producer given Uint8Array values (record lengths that are not the records' sizes, which the broker accepts compressed): every record lands once at its offset, as the broker holds it, and the batches are named", async () => {
  registerCompressionCodecs(); // lz4 and zstd for the producer below; kafkajs has only gzip
  const lanceDir = path.join(suite.work, 'lance-misframed');
  const { topic, groupId, file } = await topicAndConsumer(suite, 2, {
    table: 'events',
    format: 'raw',
    schema: 'infer',
    lance: { uri: lanceDir },
    fromBeginning: true,
    errors: { tolerance: 'none' },
    staging: { maxPartBytes: 4 * 1024 * 1024, maxPartAgeMs: 500 },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  // The bytes kafkajs writes for each value: a Uint8Array is written as String(array).
  const expected: string[] = [];
  const producer = suite.kafka.producer();
  await producer.connect();
  try {
    let n = 0;
    for (const compression of [CompressionTypes.GZIP, CompressionTypes.LZ4, CompressionTypes.ZSTD]) {
      for (let send = 0; send < 4; send++) {
        const messages = Array.from({ length: 25 }, (_, i) => {
          const json = JSON.stringify({ n: n++, text: 'x'.repeat((n * 7) % 60) });
          const asArray = (i + send) % 3 !== 0;
          expected.push(sha256(asArray ? String(new TextEncoder().encode(json)) : json));
          // kafkajs's typing says Buffer; a Uint8Array passes at run time, as in users' code.
          return {
            partition: send % 2,
            value: (asArray ? new TextEncoder().encode(json) : Buffer.from(json)) as Buffer,
          };
        });
        await producer.send({ topic, compression, messages });
      }
    }
  } finally {
    await producer.disconnect();
  }
  const replica = new ReplicaProcess(
    file,
    await fsp.mkdtemp(path.join(suite.work, 'data-misframed-')),
    testBrokers(),
  );
  await waitForCommittedAtEnd(suite.admin, groupId, topic);
  await until(
    `${expected.length} rows in the table`,
    async () => ((await rowCount(lanceDir)) >= expected.length ? true : undefined),
    90_000,
    500,
  );
  await sleep(1_000); // a late duplicate would show below
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  const rows = await tableRows(lanceDir);
  const ends = await suite.admin.fetchTopicOffsets(topic);
  for (const { partition, high } of ends) {
    const offsets = rows.filter((r) => r.partition === partition).map((r) => r.offset);
    expect({ partition, offsets: offsets.sort((a, b) => a - b) }).toEqual({
      partition,
      offsets: Array.from({ length: Number(high) }, (_, i) => i),
    });
  }
  expect(rows.map((r) => r.value).sort()).toEqual([...expected].sort());
  const problems = replica.logs.filter((l) => l.level >= 50 || l.event === 'partition.stopped');
  expect(problems).toEqual([]);
  // Each partition's first such batch is named (then once a minute).
  const named = replica.logs.filter((l) => l.event === 'kafka.batch.misframed');
  expect(
    named
      .map((l) => ({ topic: l.topic, partition: l.partition }))
      .sort((a, b) => Number(a.partition) - Number(b.partition)),
  ).toEqual([
    { topic, partition: 0 },
    { topic, partition: 1 },
  ]);
});

test('deadLetter.compression: dead letters go to their topic in the codec it names', async () => {
  const dlq = uniqueName('codec-dlq');
  await ensureTopicsServed(suite.admin, [{ topic: dlq, numPartitions: 1 }]);
  const { topic, file } = await topicAndConsumer(suite, 1, {
    deadLetter: { topic: dlq, compression: 'zstd' },
    errors: { tolerance: 'all' },
    materializer: { enabled: false },
  });
  const bad = 3;
  await produceRecords(suite.kafka, topic, 1, 20, (n) => (n % 7 === 3 ? `not json ${n}` : logValue(n)));
  const replica = new ReplicaProcess(
    file,
    await fsp.mkdtemp(path.join(suite.work, 'data-dlq-')),
    testBrokers(),
  );
  await until(
    `${bad} dead letters in ${dlq}`,
    async () => ((await suite.admin.fetchTopicOffsets(dlq))[0]!.high === String(bad) ? true : undefined),
    60_000,
  );
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  expect(await zstdBatchesIn(dlq, bad)).toBeGreaterThan(0);
});
