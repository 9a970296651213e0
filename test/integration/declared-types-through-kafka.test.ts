import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import type { Vector } from 'apache-arrow';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { testBrokers } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';
import { openTableIfCommitted } from '../../src/lance/open-if-committed';

/**
 * Declared types through a real replica (Kafka, staging workers, materializer): good
 * records land in Lance with their vectors, structs, decimals and bytes; each bad value
 * is a dead letter whose reason names the field and what was wrong.
 */
const suite = brokerSuite('kl-types');

const f32 = (values: number[]) => Buffer.from(new Float32Array(values).buffer).toString('base64');

async function until<T>(read: () => Promise<T | undefined>, what: string, timeoutMs = 120_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

test('good records land with every declared type; a wrong dimension, NaN, malformed base64 and a decimal overflow are dead letters with their reasons', async () => {
  const { topic, name, file } = await topicAndConsumer(suite, 1, {
    schema: {
      fields: {
        n: { type: 'int64', nullable: false },
        emb: { type: 'vector', dim: 3 },
        doc: { type: 'struct', fields: { title: 'string', tags: { type: 'list', items: 'string' } } },
        price: { type: 'decimal', precision: 8, scale: 2 },
        blob: 'binary',
        at: { type: 'timestamp', unit: 'us', timezone: 'UTC' },
      },
    },
    errors: { tolerance: 'all' },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const values = [
    { n: 0, emb: [1, 2, 3], doc: { title: 'a', tags: ['x', 'y'] }, price: '12.34', blob: 'AQID', at: 1 },
    { n: 1, emb: [1, 2] },
    { n: 2, emb: f32([0, NaN, 0]) },
    { n: 3, emb: f32([0.5, 0.25, 0]), doc: { title: null, tags: [] }, at: '2025-01-01T00:00:00.000001Z' },
    { n: 4, blob: 'AQI' },
    { n: 5, price: 1234567.5 },
    { n: 6 },
  ];
  const producer = suite.kafka.producer();
  await producer.connect();
  await producer.send({
    topic,
    acks: -1,
    messages: values.map((v) => ({ partition: 0, value: JSON.stringify(v) })),
  });
  await producer.disconnect();

  const dataDir = await tempDir('kl-types-replica');
  const replica = new ReplicaProcess(file, dataDir, testBrokers());
  const lanceDir = path.join(dataDir, 'lance');
  const rows = await until(async () => {
    const db = await lancedb.connect(lanceDir, { readConsistencyInterval: 0 });
    try {
      const t = await openTableIfCommitted(db, 'logs');
      if (!t) return undefined;
      const table = await t.query().toArrow();
      t.close();
      return table.numRows >= 3 ? table : undefined;
    } finally {
      db.close();
    }
  }, '3 rows in Lance');
  const dlqFile = path.join(suite.work, `${name}.dlq.jsonl`);
  const letters = await until(async () => {
    const text = await fsp.readFile(dlqFile, 'utf8').catch(() => '');
    const lines = text.trim().split('\n').filter(Boolean);
    return lines.length >= 4
      ? lines.map((l) => JSON.parse(l) as { offset: number; reason: string; detail: string })
      : undefined;
  }, '4 dead letters');
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  expect(rows.numRows).toBe(3);
  const byN = new Map<number, number>();
  [...(rows.getChild('n') as Vector)].forEach((n, i) => byN.set(Number(n as bigint), i));
  const get = (column: string, n: number): unknown => (rows.getChild(column) as Vector).get(byN.get(n)!);
  expect([...(get('emb', 0) as Vector)]).toEqual([1, 2, 3]);
  expect([...(get('emb', 3) as Vector)]).toEqual([0.5, 0.25, 0]);
  expect(get('emb', 6)).toBeNull();
  expect((get('doc', 0) as { toJSON(): unknown }).toJSON()).toMatchObject({ title: 'a' });
  expect([...(get('doc', 3) as { toJSON(): { tags: Vector } }).toJSON().tags]).toEqual([]);
  expect(String(get('price', 0))).toBe('1234');
  expect(get('blob', 0)).toEqual(new Uint8Array([1, 2, 3]));
  expect(String(rows.schema.fields.find((f) => f.name === 'at')?.type)).toBe('Timestamp<MICROSECOND, UTC>');

  expect(letters.map((l) => [l.offset, l.reason, l.detail])).toEqual([
    [1, 'schema-mismatch', 'field "emb": expected vector<float32>[3]: wrong dimension: expected 3, got 2'],
    [2, 'schema-mismatch', 'field "emb": expected vector<float32>[3]: element 1 is NaN (dimension 3)'],
    [
      4,
      'schema-mismatch',
      'field "blob": expected binary: not base64 (standard alphabet, padded to a multiple of 4 characters)',
    ],
    [
      5,
      'schema-mismatch',
      'field "price": expected decimal(8, 2): 1234567.5 overflows decimal(8, 2) (more than 8 digits)',
    ],
  ]);
  await fsp.rm(dataDir, { recursive: true, force: true });
}, 240_000);
