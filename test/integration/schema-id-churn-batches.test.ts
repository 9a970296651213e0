import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import * as lancedb from '@lancedb/lancedb';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { MAX_SCHEMA_IDS_PER_BATCH } from '../../src/schema-registry/schema-source';
import { plainColumn } from '../support/avro-fixtures';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { testBrokers } from '../support/kafka';
import { tempDir } from '../support/rows';
import { schemaRegistrySuite } from '../support/schema-registry-local';
import { openTableIfCommitted } from '../../src/lance/open-if-committed';

/**
 * Schema-id churn in one fetch: far more distinct ids than one batch resolves
 * (MAX_SCHEMA_IDS_PER_BATCH). The replica admits each batch's prefix whose ids were
 * resolved and fetches the rest again from right after it, against a real broker and
 * registry: every churned record is dead-lettered exactly once, the good records after
 * them land, and nothing is fetched and asked for in a loop.
 */
const suite = brokerSuite('kl-id-churn');
const registry = schemaRegistrySuite();
const CHURN = 3 * MAX_SCHEMA_IDS_PER_BATCH + 17;
const LOG = { type: 'record', name: 'Log', fields: [{ name: 'n', type: 'long' }] };

async function until<T>(read: () => Promise<T | undefined>, what: string, timeoutMs = 120_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

test('a fetch holding more distinct schema ids than a batch resolves is admitted in prefixes: each record once, none lost', async () => {
  const sr = new SchemaRegistry({ host: registry.url });
  const consumer = await topicAndConsumer(suite, 1, {
    format: 'avro',
    schema: 'infer',
    schemaRegistry: { url: registry.url },
    errors: { tolerance: 'all' },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const id = (
    await sr.register(
      { type: SchemaType.AVRO, schema: JSON.stringify(LOG) },
      { subject: `${consumer.topic}-value` },
    )
  ).id;
  const header = (schemaId: number) => {
    const bytes = Buffer.alloc(5);
    bytes.writeUInt32BE(schemaId, 1);
    return bytes;
  };
  const values = [
    ...Array.from({ length: CHURN }, (_, i) => header(900_000_000 + i)),
    await sr.encode(id, { n: 1 }),
    await sr.encode(id, { n: 2 }),
  ];
  const producer = suite.kafka.producer();
  await producer.connect();
  await producer.send({
    topic: consumer.topic,
    acks: -1,
    messages: values.map((value) => ({ partition: 0, value })),
  });
  await producer.disconnect();

  const dataDir = await tempDir('kl-id-churn-replica');
  const replica = new ReplicaProcess(consumer.file, dataDir, testBrokers());
  const dlq = path.join(suite.work, `${consumer.name}.dlq.jsonl`);
  const letters = async () =>
    (await fsp.readFile(dlq, 'utf8').catch(() => ''))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { offset: number | string; reason: string });
  const rows = async () => {
    const db = await lancedb.connect(path.join(dataDir, 'lance'), { readConsistencyInterval: 0 });
    try {
      const t = await openTableIfCommitted(db, 'logs');
      if (!t) return undefined;
      const table = await t.query().toArrow();
      t.close();
      return table.numRows >= 2 ? table : undefined;
    } finally {
      db.close();
    }
  };
  const table = await until(rows, 'the good records after the churn land');
  const dead = await until(async () => {
    const l = await letters();
    return l.length >= CHURN ? l : undefined;
  }, 'every churned record dead-lettered');
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  expect(plainColumn(table, '_offset')).toEqual([BigInt(CHURN), BigInt(CHURN + 1)]);
  expect(dead).toHaveLength(CHURN);
  expect(new Set(dead.map((l) => Number(l.offset))).size).toBe(CHURN);
  expect(new Set(dead.map((l) => l.reason))).toEqual(new Set(['unknown-schema-id']));
}, 300_000);
