import * as lancedb from '@lancedb/lancedb';
import { Field, RecordBatch, Schema, Struct, Utf8, makeData, vectorFromArray } from 'apache-arrow';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { silentLogger } from '../../src/common/logger';
import { LanceTable, type LanceTarget } from '../../src/lance/lance-table';
import { range, rowsFor, tempDir } from '../support/rows';

/**
 * A table is created without its system indexes (BTree on _offset, bitmaps on _partition
 * and _topic_id) and gets them at its first compaction: with 200 routed tables, three
 * index commits per create were a large share of the replica's Lance work, and an index
 * built on an empty table covers no row until a compaction anyway. The hazard: a read that
 * depended on the indexes. A publication replayed before the first compaction (a
 * `writing` one after a crash, an insert-if-absent of rows already in) must still be
 * counted and land exactly once, and once indexed, the same again.
 */
const TOPIC = 'events';
const TOPIC_ID = 'id-1';
const ROWS = 1_000;

function withTopicId(batch: RecordBatch): RecordBatch {
  const fields = [...batch.schema.fields, new Field('_topic_id', new Utf8(), false)];
  const children = [
    ...batch.data.children,
    vectorFromArray(
      Array.from({ length: batch.numRows }, () => TOPIC_ID),
      new Utf8(),
    ).data[0]!,
  ];
  return new RecordBatch(
    new Schema(fields),
    makeData({ type: new Struct(fields), length: batch.numRows, nullCount: 0, children }),
  );
}

const publication = (from: number) =>
  (async function* () {
    yield await Promise.resolve(withTopicId(rowsFor(TOPIC, 0, range(from, from + ROWS))));
  })();

const interval = (from: number) => [
  { topic: TOPIC, partition: 0, first: from, last: from + ROWS - 1, topicId: TOPIC_ID },
];

async function indexedColumns(target: LanceTarget): Promise<string[]> {
  const db = await lancedb.connect(target.uri);
  try {
    const table = await db.openTable(target.table);
    return (await table.listIndices()).map((i) => i.columns.join(',')).sort();
  } finally {
    db.close();
  }
}

let dir: string;
beforeEach(async () => {
  dir = await tempDir('kl-system-indexes');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

test('a table created without system indexes counts and replays a publication once, and gets the indexes at its first compaction', async () => {
  const target: LanceTarget = { uri: path.join(dir, 'lance'), table: 'logs' };
  const lance = await LanceTable.connect(target, silentLogger());
  try {
    await lance.append({ batches: publication(0), mode: 'insert-if-absent' });
    expect(await indexedColumns(target)).toEqual([]);
    // Replayed before any compaction: counted by a scan (both counts that settle a
    // `writing` publication), inserted nothing.
    expect(await lance.countRows(interval(0))).toBe(ROWS);
    expect(await lance.countRowsFrom(interval(0), 1)).toBe(ROWS);
    await lance.append({ batches: publication(0), mode: 'insert-if-absent' });
    expect(await lance.countRows(interval(0))).toBe(ROWS);

    await lance.optimize();
    expect(await indexedColumns(target)).toEqual(['_offset', '_partition', '_topic_id']);
    await lance.append({ batches: publication(0), mode: 'insert-if-absent' });
    await lance.append({ batches: publication(ROWS), mode: 'insert-if-absent' });
    expect(await lance.countRows(interval(0))).toBe(ROWS);
    expect(await lance.countRows(interval(ROWS))).toBe(ROWS);
    expect(await lance.totalRows()).toBe(2 * ROWS);
  } finally {
    lance.close();
  }
  // Another handle (a restarted replica) finds them in place and compacts without building twice.
  const again = await LanceTable.connect(target, silentLogger());
  try {
    await again.optimize();
  } finally {
    again.close();
  }
  expect(await indexedColumns(target)).toEqual(['_offset', '_partition', '_topic_id']);
}, 60_000);
