import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { Field, FixedSizeList, Float32, Int32, Int64, Schema, Utf8 } from 'apache-arrow';
import { writeConsumer } from '../support/ingestion-fixture';
import { tempDir } from '../support/rows';
import { runBounded } from '../support/run-bounded';

const BIN = path.resolve(__dirname, '../../bin/kafka-lance');

test('compact builds the declared indexes the table can train and says which wait for rows', async () => {
  const dir = await tempDir('kl-compact-indexes');
  const db = await lancedb.connect(path.join(dir, 'lance'));
  const rows = Array.from({ length: 600 }, (_, n) => ({
    _topic: 't',
    _partition: 0,
    _offset: n,
    n,
    emb: Array.from({ length: 16 }, (_, j) => Math.cos(n * (j + 1))),
    service: `svc-${n % 3}`,
  }));
  const schema = new Schema([
    new Field('_topic', new Utf8(), false),
    new Field('_partition', new Int32(), false),
    new Field('_offset', new Int64(), false),
    new Field('n', new Int64(), true),
    new Field('emb', new FixedSizeList(16, new Field('item', new Float32(), true)), true),
    new Field('service', new Utf8(), true),
  ]);
  const table = await db.createEmptyTable('docs', schema);
  await table.add(rows);
  table.close();
  db.close();
  const file = await writeConsumer(dir, {
    name: 'docs',
    topics: ['t'],
    table: 'docs',
    schema: { fields: { n: 'int64', emb: { type: 'vector', dim: 16 }, service: 'string' } },
    indexes: [
      { column: 'emb', type: 'ivf_flat', numPartitions: 2 },
      { column: 'service', type: 'bitmap' },
      { column: 'n', type: 'btree', name: 'n_btree' },
    ],
  });
  const waiting = await writeConsumer(dir, {
    name: 'docs2',
    topics: ['t'],
    table: 'docs',
    schema: { fields: { n: 'int64', emb: { type: 'vector', dim: 16 } } },
    indexes: [{ column: 'emb', type: 'ivf_pq', name: 'emb_pq', numPartitions: 4, numSubVectors: 4 }],
  });

  const out = runBounded(process.execPath, [BIN, 'compact', '-c', file, '--data-dir', dir]);
  expect(out.stderr).toBe('');
  expect(out.status).toBe(0);
  expect(out.stdout).toContain('index emb_idx on emb (ivf_flat): created, 600 indexed, 0 unindexed');
  expect(out.stdout).toContain('index service_idx on service (bitmap): created, 600 indexed, 0 unindexed');
  expect(out.stdout).toContain('index n_btree on n (btree): created, 600 indexed, 0 unindexed');
  // 4 partitions train on 1,024 rows: not yet.
  const second = runBounded(process.execPath, [BIN, 'compact', '-c', waiting, '--data-dir', dir]);
  expect(second.status).toBe(0);
  expect(second.stdout).toContain('index emb_pq on emb (ivf_pq): waiting-rows, 0 indexed, 600 unindexed');

  const reopened = await (await lancedb.connect(path.join(dir, 'lance'))).openTable('docs');
  // The system indexes too: a table no replica compacted yet has none (ensureTableSchema).
  expect((await reopened.listIndices()).map((i) => i.name).sort()).toEqual([
    '_offset_idx',
    '_partition_idx',
    'emb_idx',
    'n_btree',
    'service_idx',
  ]);
  reopened.close();
  await fsp.rm(dir, { recursive: true, force: true });
});
