import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { COMPATIBILITY, SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { testBrokers } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';
import { plainColumn } from '../support/avro-fixtures';
import { schemaRegistrySuite } from '../support/schema-registry-local';
import { lanceRows, until } from '../support/registry-round-trip';
import { QUARANTINE_DIR } from '../../src/staging/quarantine';

/**
 * A writer schema that changes a column's type mid-stream, through a real Apicurio registry,
 * a real broker and a real replica process: the table keeps its type, the publication of the
 * changed records is set aside with its reason (never a dead letter per record at decode,
 * never a stalled table), and later compatible records go on landing.
 */
const suite = brokerSuite('kl-avro-retype');
const registry = schemaRegistrySuite();

interface Letter {
  readonly offset: number;
  readonly reason: string;
  readonly detail: string;
  readonly value: string;
}

const LOG_V1 = {
  type: 'record',
  name: 'Log',
  namespace: 'demo',
  fields: [
    { name: 'n', type: 'long' },
    { name: 'message', type: 'string' },
  ],
};
/** `n` becomes a string: Lance cannot change the column's type. */
const LOG_RETYPED = { ...LOG_V1, fields: [{ name: 'n', type: 'string' }, LOG_V1.fields[1]] };
/** Version 1 plus an optional field: compatible with the table. */
const LOG_V2 = {
  ...LOG_V1,
  fields: [...LOG_V1.fields, { name: 'region', type: ['null', 'string'], default: null }],
};

/** How long this file waits for the replica (a retyped publication is set aside after its retries). */
const WAIT_MS = 90_000;

async function jsonLines(file: string): Promise<Letter[]> {
  const text = await fsp.readFile(file, 'utf8').catch(() => '');
  return text
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Letter);
}

/** Subject-level compatibility NONE: the registry would refuse the type change under BACKWARD. */
async function allowAnyChange(url: string, subject: string): Promise<void> {
  const response = await fetch(`${url}/config/${encodeURIComponent(subject)}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/vnd.schemaregistry.v1+json' },
    body: JSON.stringify({ compatibility: 'NONE' }),
  });
  expect(response.status).toBe(200);
}

test("a writer schema that changes a column's type mid-stream: the changed records' publication is set aside with its reason (quarantine, dead-letter file, metric), the old type's records and later compatible ones land, and every offset is accounted for", async () => {
  const sr = new SchemaRegistry({ host: registry.url });
  const consumer = await topicAndConsumer(suite, 1, {
    format: 'avro',
    schema: 'infer',
    schemaRegistry: { url: registry.url, requestTimeoutMs: 2_000 },
    errors: { tolerance: 'all' },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const subject = `${consumer.topic}-value`;
  const v1 = (await sr.register({ type: SchemaType.AVRO, schema: JSON.stringify(LOG_V1) }, { subject })).id;
  const producer = suite.kafka.producer();
  await producer.connect();
  const send = async (values: readonly Buffer[]) =>
    producer.send({
      topic: consumer.topic,
      acks: -1,
      messages: values.map((value) => ({ partition: 0, value })),
    });
  await send([await sr.encode(v1, { n: 0, message: 'a' }), await sr.encode(v1, { n: 1, message: 'b' })]);

  const dataDir = await tempDir('kl-avro-retype');
  const replica = new ReplicaProcess(consumer.file, dataDir, testBrokers());
  const metricsPort = await replica.metricsPort();
  await lanceRows(dataDir, 2, WAIT_MS);

  await allowAnyChange(registry.url, subject);
  const retyped = (
    await sr.register(
      { type: SchemaType.AVRO, schema: JSON.stringify(LOG_RETYPED) },
      { subject, compatibility: COMPATIBILITY.NONE },
    )
  ).id;
  const v2 = (
    await sr.register(
      { type: SchemaType.AVRO, schema: JSON.stringify(LOG_V2) },
      { subject, compatibility: COMPATIBILITY.NONE },
    )
  ).id;
  // Offsets 2-3 change the type; 4 is version 1 again; 5 is version 2 (a column added).
  await send([
    await sr.encode(retyped, { n: 'two', message: 'c' }),
    await sr.encode(retyped, { n: 'three', message: 'd' }),
  ]);
  await send([await sr.encode(v1, { n: 4, message: 'e' })]);
  await send([await sr.encode(v2, { n: 5, message: 'f', region: 'eu' })]);
  await producer.disconnect();

  const rows = await lanceRows(dataDir, 4, WAIT_MS);
  const setAsideFile = path.join(dataDir, 'dead-letter', `${consumer.name}.publications.jsonl`);
  const setAside = await until(
    async () => {
      const l = await jsonLines(setAsideFile);
      return l.length >= 2 ? l : undefined;
    },
    'the retyped records in the set-aside publications file',
    WAIT_MS,
  );
  const metrics = await until(
    async () => {
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      return /kafka_lance_quarantined_parts_total\{[^}]*reason="schema-incompatible"[^}]*\} [1-9]/.test(text)
        ? text
        : undefined;
    },
    'the quarantined-parts counter',
    WAIT_MS,
  );
  // Committed = log end: the set-aside publication held nothing back.
  const committed = await until(
    async () => {
      const [offsets] = await suite.admin.fetchOffsets({
        groupId: consumer.groupId,
        topics: [consumer.topic],
      });
      const at = Number(offsets!.partitions[0]!.offset);
      return at === 6 ? at : undefined;
    },
    'offsets committed through the log end',
    WAIT_MS,
  );
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  // The table kept its type; the old type's records and the later compatible ones are rows.
  expect(String(rows.schema.fields.find((f) => f.name === 'n')?.type)).toBe('Int64');
  const offsets = plainColumn(rows, '_offset').map(Number);
  const order = [...offsets.keys()].sort((a, b) => offsets[a]! - offsets[b]!);
  const column = (name: string) => order.map((i) => plainColumn(rows, name)[i]);
  expect(column('_offset')).toEqual([0n, 1n, 4n, 5n]);
  expect(column('n')).toEqual([0n, 1n, 4n, 5n]);
  expect(column('region')).toEqual([null, null, null, 'eu']);

  // The changed records: set aside with the reason naming the column and both types.
  expect(setAside.map((l) => [l.offset, l.reason])).toEqual([
    [2, 'schema-mismatch'],
    [3, 'schema-mismatch'],
  ]);
  expect(setAside[0]!.detail).toMatch(/column n is Int64 in the table but Utf8 in the staged data/);
  expect(JSON.parse(Buffer.from(setAside[0]!.value, 'base64').toString('utf8'))).toMatchObject({
    n: 'two',
    message: 'c',
  });
  const quarantine = path.join(dataDir, 'staging', 'logs', QUARANTINE_DIR);
  const reasons = (await fsp.readdir(quarantine)).filter((f) => f.endsWith('.reason.json'));
  expect(reasons.length).toBeGreaterThan(0);
  const reason = JSON.parse(await fsp.readFile(path.join(quarantine, reasons[0]!), 'utf8')) as {
    reason: string;
  };
  expect(reason.reason).toBe('schema-incompatible');
  expect(metrics).toMatch(/kafka_lance_quarantined_parts_total/);

  // Nothing lost: every offset below the committed one is a row, a dead letter or set aside;
  // none was a dead letter at decode.
  const decodeLetters = await jsonLines(path.join(suite.work, `${consumer.name}.dlq.jsonl`));
  expect(decodeLetters).toEqual([]);
  const accounted = [...column('_offset').map(Number), ...setAside.map((l) => l.offset)].sort(
    (a, b) => a - b,
  );
  expect(accounted).toEqual([...Array(committed).keys()]);
  await fsp.rm(dataDir, { recursive: true, force: true });
}, 180_000);
