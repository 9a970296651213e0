import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { Partitioners } from 'kafkajs';
import { definition, seedTable } from '../../bench/upsert-e2e';
import { silentLogger } from '../../src/common/logger';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { LanceTable } from '../../src/lance/lance-table';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { until } from '../support/faults';
import { testBrokers } from '../support/kafka';
import { openTableIfCommitted } from '../../src/lance/open-if-committed';

/**
 * bench/upsert-e2e.ts seeds its 1M- and 10M-key tables directly (a replica would take an hour
 * to write 10M rows here), by hand-built Arrow rows into a table LanceTable creates. If the
 * replica's staged schema or the table it creates changed (a new system column, another key
 * metadata, another index), the bench would measure merges into a table no replica makes, or
 * a replica refusing it. A real replica of the bench's definition creates its table here, and
 * the seeded one must match it once both are compacted: columns, types, nullability, key
 * metadata and indexes.
 * Run after `npm run build` (the replica runs from dist/).
 */
const suite = brokerSuite('kl-upsert-seed');

interface TableShape {
  readonly fields: string[];
  readonly metadata: string;
  readonly indexes: string[];
}

async function shapeOf(uri: string): Promise<TableShape> {
  const db = await lancedb.connect(uri);
  try {
    const table = await db.openTable('logs');
    const schema = await table.schema();
    const indexes = (await table.listIndices()).map((i) => `${i.indexType}(${i.columns.join(',')})`).sort();
    table.close();
    return {
      fields: schema.fields.map(
        (f) => `${f.name} ${String(f.type)} ${f.nullable} ${JSON.stringify([...f.metadata])}`,
      ),
      metadata: JSON.stringify([...schema.metadata]),
      indexes,
    };
  } finally {
    db.close();
  }
}

test("the bench's seeded upsert table has the columns, key and indexes a replica of the bench's definition creates", async () => {
  const replicaUri = path.join(suite.work, 'replica-lance');
  const seededUri = path.join(suite.work, 'seeded-lance');
  const consumer = await topicAndConsumer(suite, 2, {
    ...definition('upsert', replicaUri),
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const producer = suite.kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  await producer.send({
    topic: consumer.topic,
    acks: -1,
    messages: [
      { key: 'key-000000001', value: JSON.stringify({ n: 1, body: 'a value' }) },
      { key: 'key-000000002', value: null },
    ],
  });
  await producer.disconnect();
  const replica = new ReplicaProcess(
    consumer.file,
    await fsp.mkdtemp(path.join(suite.work, 'data-')),
    testBrokers(),
  );
  await until(
    'the replica to publish both records',
    async () => {
      const db = await lancedb.connect(replicaUri, { readConsistencyInterval: 0 });
      try {
        const opened = await openTableIfCommitted(db, 'logs');
        if (!opened) return undefined;
        return (await opened.countRows()) === 2 ? true : undefined;
      } finally {
        db.close();
      }
    },
    120_000,
    500,
  );
  expect((await replica.stop()).code).toBe(0);
  // A replica's table as the bench's merges meet it: after its first compaction, which
  // builds the key's and the system columns' indexes (the seed is compacted the same way).
  const compacting = await LanceTable.connect({ uri: replicaUri, table: 'logs' }, silentLogger(), {
    upsertKey: ['_key'],
  });
  await compacting.optimize();
  compacting.close();

  await seedTable({ uri: seededUri, table: 'logs' }, 100, testBrokers());
  const made = await shapeOf(replicaUri);
  expect(made.fields.some((f) => f.startsWith('_key ') && f.includes('unenforced-primary-key'))).toBe(true);
  expect(await shapeOf(seededUri)).toEqual(made);
});
