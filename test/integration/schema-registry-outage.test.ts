import { promises as fsp, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import * as lancedb from '@lancedb/lancedb';
import * as protobuf from 'protobufjs';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { testBrokers } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';
import { plainColumn } from '../support/avro-fixtures';
import { protobufFramed } from '../support/protobuf-fixtures';
import {
  OUTAGE_SCHEMA_REGISTRY_PORT,
  schemaRegistryLocal,
  schemaRegistryUrl,
} from '../support/schema-registry-local';
import { openTableIfCommitted } from '../../src/lance/open-if-committed';

/**
 * A registry that stops answering while a replica runs: records whose writer schema is
 * not cached wait for it (their partition holds), none is dead-lettered, and all of them
 * land once it answers again. The registry process is stopped with SIGSTOP (a hung
 * registry: every request times out, the slower failure) and continued with SIGCONT,
 * which keeps the test short; it runs on a port of its own, since this suite stops it.
 */
const PORT = OUTAGE_SCHEMA_REGISTRY_PORT;
const URL = schemaRegistryUrl(PORT);
const suite = brokerSuite('kl-avro-outage');

beforeAll(() => {
  schemaRegistryLocal('reset', PORT);
  const started = schemaRegistryLocal('start', PORT);
  if (started.code !== 0) throw new Error(started.output);
}, 180_000);
afterAll(() => {
  registry('SIGCONT');
  schemaRegistryLocal('reset', PORT);
}, 60_000);

/** Signals the registry process (its pid file is the script's). */
function registry(signal: 'SIGSTOP' | 'SIGCONT'): void {
  const home =
    process.env.SCHEMA_REGISTRY_LOCAL_HOME ??
    path.resolve(__dirname, '../../deploy/schema-registry-local/.cache');
  const pid = Number(readFileSync(path.join(home, `registry-${PORT}`, 'registry.pid'), 'utf8'));
  process.kill(pid, signal);
}

const LOG_V1 = {
  type: 'record',
  name: 'Log',
  fields: [
    { name: 'n', type: 'long' },
    { name: 'message', type: 'string' },
  ],
};
const LOG_V2 = {
  ...LOG_V1,
  fields: [...LOG_V1.fields, { name: 'region', type: ['null', 'string'], default: null }],
};

async function until<T>(read: () => Promise<T | undefined>, what: string, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

test('a registry that stops answering mid-run holds the records back and dead-letters none; all land once it is back', async () => {
  const sr = new SchemaRegistry({ host: URL });
  const consumer = await topicAndConsumer(suite, 1, {
    format: 'avro',
    schema: 'infer',
    schemaRegistry: { url: URL, requestTimeoutMs: 1_000 },
    errors: { tolerance: 'all' },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const subject = { subject: `${consumer.topic}-value` };
  const v1 = (await sr.register({ type: SchemaType.AVRO, schema: JSON.stringify(LOG_V1) }, subject)).id;
  // Registered now, first used while the registry is down: the replica has not cached it.
  const v2 = (await sr.register({ type: SchemaType.AVRO, schema: JSON.stringify(LOG_V2) }, subject)).id;
  const producer = suite.kafka.producer();
  await producer.connect();
  const send = async (values: Buffer[]) =>
    producer.send({
      topic: consumer.topic,
      acks: -1,
      messages: values.map((value) => ({ partition: 0, value })),
    });
  await send([await sr.encode(v1, { n: 0, message: 'a' }), await sr.encode(v1, { n: 1, message: 'b' })]);
  const later = [
    await sr.encode(v2, { n: 2, message: 'c', region: 'eu' }),
    await sr.encode(v1, { n: 3, message: 'd' }),
    await sr.encode(v2, { n: 4, message: 'e', region: 'us' }),
  ];

  const dataDir = await tempDir('kl-avro-outage-replica');
  const replica = new ReplicaProcess(consumer.file, dataDir, testBrokers());
  const rowCount = async () => {
    const db = await lancedb.connect(path.join(dataDir, 'lance'), { readConsistencyInterval: 0 });
    try {
      const t = await openTableIfCommitted(db, 'logs');
      if (!t) return 0;
      const n = await t.countRows();
      t.close();
      return n;
    } finally {
      db.close();
    }
  };
  await until(async () => ((await rowCount()) >= 2 ? true : undefined), '2 rows before the outage');

  registry('SIGSTOP');
  await send(later);
  await replica.waitForEvent('schema-registry.unreachable', 30_000);
  const port = await replica.metricsPort();
  const metric = async () =>
    (await (await fetch(`http://127.0.0.1:${port}/metrics`)).text())
      .split('\n')
      .find((l) => l.startsWith('kafka_lance_schema_registry_unreachable '));
  expect(await metric()).toBe('kafka_lance_schema_registry_unreachable 1');
  // Several retries later: still waiting, nothing dead-lettered, nothing skipped.
  await new Promise((r) => setTimeout(r, 3_000));
  const dlq = path.join(suite.work, `${consumer.name}.dlq.jsonl`);
  expect(await fsp.readFile(dlq, 'utf8').catch(() => '')).toBe('');
  expect(await rowCount()).toBe(2);

  registry('SIGCONT');
  await replica.waitForEvent('schema-registry.reachable', 30_000);
  await until(async () => ((await rowCount()) >= 5 ? true : undefined), '5 rows after the outage');
  expect(await metric()).toBe('kafka_lance_schema_registry_unreachable 0');
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  await producer.disconnect();

  const db = await lancedb.connect(path.join(dataDir, 'lance'));
  const table = await (await db.openTable('logs')).query().toArrow();
  db.close();
  const offsets = plainColumn(table, '_offset') as bigint[];
  expect([...offsets].sort((a, b) => Number(a - b))).toEqual([0n, 1n, 2n, 3n, 4n]);
  const region = plainColumn(table, 'region');
  expect(offsets.map((o, i) => [o, region[i]]).sort((a, b) => Number(a[0]) - Number(b[0]))).toEqual([
    [0n, null],
    [1n, null],
    [2n, 'eu'],
    [3n, null],
    [4n, 'us'],
  ]);
  expect(await fsp.readFile(dlq, 'utf8').catch(() => '')).toBe('');
  // One warning for the whole outage, however many retries it took.
  expect(replica.logs.filter((l) => l.event === 'schema-registry.unreachable')).toHaveLength(1);
  await fsp.rm(dataDir, { recursive: true, force: true });
}, 150_000);

const PROTO_LOG =
  'syntax = "proto3";\npackage demo;\n\nmessage Log {\n  int64 n = 1;\n  string message = 2;\n}\n';
const KEY = { type: 'record', name: 'LogKey', fields: [{ name: 'host', type: 'string' }] };

test('Protobuf values with Avro keys: a key schema first seen while the registry hangs holds its records back too; none is dead-lettered, all land after', async () => {
  const sr = new SchemaRegistry({ host: URL });
  const consumer = await topicAndConsumer(suite, 1, {
    format: 'protobuf',
    includeKey: true,
    keyFormat: 'avro',
    schema: 'infer',
    schemaRegistry: { url: URL, requestTimeoutMs: 1_000 },
    errors: { tolerance: 'all' },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const valueId = (
    await sr.register(
      { type: SchemaType.PROTOBUF, schema: PROTO_LOG },
      { subject: `${consumer.topic}-value` },
    )
  ).id;
  // Registered now, first used while the registry is down: the replica has not cached it.
  const keyId = (
    await sr.register(
      { type: SchemaType.AVRO, schema: JSON.stringify(KEY) },
      { subject: `${consumer.topic}-key` },
    )
  ).id;
  const type = protobuf.parse(PROTO_LOG, new protobuf.Root(), { keepCase: true }).root.lookupType('demo.Log');
  const value = (n: number) =>
    protobufFramed(valueId, [0], type.encode(type.fromObject({ n, message: `m${n}` })).finish());
  const producer = suite.kafka.producer();
  await producer.connect();
  await producer.send({
    topic: consumer.topic,
    acks: -1,
    messages: [{ partition: 0, key: null, value: value(0) }],
  });
  const later = [{ partition: 0, key: await sr.encode(keyId, { host: 'web-1' }), value: value(1) }];

  const dataDir = await tempDir('kl-protobuf-outage-replica');
  const replica = new ReplicaProcess(consumer.file, dataDir, testBrokers());
  const rows = async () => {
    const db = await lancedb.connect(path.join(dataDir, 'lance'), { readConsistencyInterval: 0 });
    try {
      const t = await openTableIfCommitted(db, 'logs');
      if (!t) return undefined;
      const table = await t.query().toArrow();
      t.close();
      return table;
    } finally {
      db.close();
    }
  };
  await until(
    async () => ((await rows())?.numRows === 1 ? true : undefined),
    'the first row before the outage',
  );

  registry('SIGSTOP');
  await producer.send({ topic: consumer.topic, acks: -1, messages: later });
  await replica.waitForEvent('schema-registry.unreachable', 30_000);
  await new Promise((r) => setTimeout(r, 3_000));
  const dlq = path.join(suite.work, `${consumer.name}.dlq.jsonl`);
  expect(await fsp.readFile(dlq, 'utf8').catch(() => '')).toBe('');
  expect((await rows())?.numRows).toBe(1);

  registry('SIGCONT');
  await replica.waitForEvent('schema-registry.reachable', 30_000);
  const table = await until(async () => {
    const t = await rows();
    return t && t.numRows >= 2 ? t : undefined;
  }, '2 rows after the outage');
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  await producer.disconnect();
  const offsets = plainColumn(table, '_offset') as bigint[];
  const keys = plainColumn(table, '_key');
  expect(offsets.map((o, i) => [o, keys[i]]).sort((a, b) => Number(a[0]) - Number(b[0]))).toEqual([
    [0n, null],
    [1n, { host: 'web-1' }],
  ]);
  expect(await fsp.readFile(dlq, 'utf8').catch(() => '')).toBe('');
  await fsp.rm(dataDir, { recursive: true, force: true });
}, 150_000);
