import * as lancedb from '@lancedb/lancedb';
import {
  Field,
  RecordBatch,
  Schema,
  Struct,
  Table as ArrowTable,
  Utf8,
  makeData,
  vectorFromArray,
} from 'apache-arrow';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { silentLogger } from '../../src/common/logger';
import { LanceTable, type LanceTarget, type WriteMode } from '../../src/lance/lance-table';
import { rowKeyMetadata } from '../../src/lance/table-schema';
import { TEST_SCHEMA, range, rowsFor, tempDir } from '../support/rows';

/**
 * A topic deleted and recreated under the same name reuses offsets from 0: its rows
 * share (_topic, _partition, _offset) with the deleted incarnation's rows, and only
 * `_topic_id` tells them apart. Keyed by the triple, an insert-if-absent inserted none
 * of them (lost) and a count found the old rows (a staged publication "more than
 * published", the table stopped). A table created with `_topic_id` keys on it; a table
 * created before it keeps its key (Lance never changes it; the added column is
 * nullable, which a key column may not be) and inserts colliding rows on key + id.
 */
const TOPIC = 'events';

function withTopicId(batch: RecordBatch, id: string): RecordBatch {
  const fields = [...batch.schema.fields, new Field('_topic_id', new Utf8(), false)];
  const children = [
    ...batch.data.children,
    vectorFromArray(
      Array.from({ length: batch.numRows }, () => id),
      new Utf8(),
    ).data[0]!,
  ];
  return new RecordBatch(
    new Schema(fields),
    makeData({ type: new Struct(fields), length: batch.numRows, nullCount: 0, children }),
  );
}

async function write(target: LanceTarget, batch: RecordBatch, mode: WriteMode): Promise<void> {
  const table = await LanceTable.connect(target, silentLogger());
  try {
    await table.append({
      batches: (async function* () {
        yield await Promise.resolve(batch);
      })(),
      mode: mode,
    });
  } finally {
    table.close();
  }
}

async function inspect(target: LanceTarget) {
  const table = await LanceTable.connect(target, silentLogger());
  const db = await lancedb.connect(target.uri);
  try {
    const schema = await (await db.openTable(target.table)).schema();
    const count = (topicId?: string) =>
      table.countRows([{ topic: TOPIC, partition: 0, first: 0, last: 999, ...(topicId ? { topicId } : {}) }]);
    return {
      total: await table.totalRows(),
      x: await count('X'),
      y: await count('Y'),
      key: schema.fields
        .filter((f) => f.metadata.get('lance-schema:unenforced-primary-key') === 'true')
        .map((f) => f.name),
    };
  } finally {
    table.close();
    db.close();
  }
}

let dir: string;
beforeEach(async () => {
  dir = await tempDir('kl-incarnations');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

test.each(['append', 'insert-if-absent'] as const)(
  '%s: a new table keys on _topic_id; a second incarnation at the same offsets goes in, and each count finds only its own rows',
  async (mode) => {
    const target: LanceTarget = { uri: path.join(dir, 'lance'), table: 'logs' };
    await write(target, withTopicId(rowsFor(TOPIC, 0, range(0, 100)), 'X'), mode);
    await write(target, withTopicId(rowsFor(TOPIC, 0, range(0, 50)), 'Y'), mode);
    expect(await inspect(target)).toEqual({
      total: 150,
      x: 100,
      y: 50,
      key: ['_topic', '_partition', '_offset', '_topic_id'],
    });
    if (mode === 'insert-if-absent') {
      // The same rows again (a late owner's copy): nothing inserted.
      await write(target, withTopicId(rowsFor(TOPIC, 0, range(0, 50)), 'Y'), mode);
      expect((await inspect(target)).total).toBe(150);
    }
  },
  60_000,
);

test("a table keyed before _topic_id keeps its key, and its rows written before topic ids count as the current incarnation's: a replica upgraded mid-stream re-publishing its predecessor's rows inserts none twice", async () => {
  const target: LanceTarget = { uri: path.join(dir, 'lance'), table: 'logs' };
  // As the previous version created it: the key on (_topic, _partition, _offset), no _topic_id.
  const keyed = rowKeyMetadata(TEST_SCHEMA.fields.map((f) => f.name));
  const db = await lancedb.connect(target.uri);
  const old = await db.createEmptyTable(
    'logs',
    new Schema(
      TEST_SCHEMA.fields.map((f) => {
        const k = keyed.find((x) => x.path === f.name);
        return k ? new Field(f.name, f.type, f.nullable, new Map(Object.entries(k.metadata))) : f;
      }),
    ),
  );
  await old.add(new ArrowTable([rowsFor(TOPIC, 0, range(0, 100))]));
  db.close();

  // 'published' mode: the upgraded replica re-publishes its predecessor's published,
  // uncommitted tail (50-99) with the topic id, then new records.
  await write(target, withTopicId(rowsFor(TOPIC, 0, range(50, 120)), 'Y'), 'insert-if-absent');
  const after = await inspect(target);
  expect(after).toEqual({ total: 120, x: 100, y: 120, key: ['_topic', '_partition', '_offset'] });
}, 60_000);

test('four concurrent inserts of the same rows of a recreated topic leave them once (the key with _topic_id is still checked by Lance)', async () => {
  const target: LanceTarget = { uri: path.join(dir, 'lance'), table: 'logs' };
  await write(target, withTopicId(rowsFor(TOPIC, 0, range(0, 500)), 'X'), 'insert-if-absent');
  for (const round of [0, 1]) {
    const rows = withTopicId(rowsFor(TOPIC, 0, range(round * 250, round * 250 + 250)), 'Y');
    const outcomes = await Promise.allSettled(
      [1, 2, 3, 4].map(() => write(target, rows, 'insert-if-absent')),
    );
    for (const o of outcomes) if (o.status === 'rejected') throw o.reason;
  }
  expect(await inspect(target)).toMatchObject({ total: 1_000, x: 500, y: 500 });
}, 120_000);
