import * as lancedb from '@lancedb/lancedb';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { LanceTable, type LanceTarget } from '../../src/lance/lance-table';
import { silentLogger } from '../../src/common/logger';
import { TEST_SCHEMA, range, rowsFor, tempDir } from '../support/rows';

/**
 * 'published' commit mode writes every publication as an insert-if-absent keyed on
 * (_topic, _partition, _offset), Lance's unenforced primary key. Measured before
 * relying on it (LanceDB 0.39, Lance 12): concurrent merge-inserts of the same keys
 * are checked against each other at commit (the later one retries and inserts
 * nothing) only when the key is the table's primary key; without it, or against a
 * plain append, the rows are doubled. So these tests race real writers: four
 * connections insert the same rows at once, three times over.
 */
const TOPIC = 'events';
const ROWS = 20_000;

const batches = (from: number) =>
  (async function* () {
    yield await Promise.resolve(rowsFor(TOPIC, 0, range(from, from + ROWS)));
  })();

async function raceInserts(target: LanceTarget, from: number): Promise<void> {
  const writers = await Promise.all([1, 2, 3, 4].map(() => LanceTable.connect(target, silentLogger())));
  const outcomes = await Promise.allSettled(
    writers.map((w) => w.append({ batches: batches(from), mode: 'insert-if-absent' })),
  );
  for (const w of writers) w.close();
  for (const o of outcomes) if (o.status === 'rejected') throw o.reason;
}

async function countIn(target: LanceTarget, from: number): Promise<number> {
  const db = await lancedb.connect(target.uri);
  try {
    const table = await db.openTable(target.table);
    return await table.countRows(`_offset >= ${from} AND _offset < ${from + ROWS}`);
  } finally {
    db.close();
  }
}

let dir: string;
beforeEach(async () => {
  dir = await tempDir('kl-insert-if-absent');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

test('a table created by a publication carries the row key as its unenforced primary key; four concurrent inserts of the same rows leave them once', async () => {
  const target: LanceTarget = { uri: path.join(dir, 'lance'), table: 'logs' };
  const first = await LanceTable.connect(target, silentLogger());
  await first.ensureSchema(TEST_SCHEMA);
  first.close();
  const db = await lancedb.connect(target.uri);
  const schema = await (await db.openTable('logs')).schema();
  db.close();
  const keyed = schema.fields
    .filter((f) => f.metadata.get('lance-schema:unenforced-primary-key') === 'true')
    .map((f) => [f.name, f.metadata.get('lance-schema:unenforced-primary-key:position')]);
  expect(keyed).toEqual([
    ['_topic', '1'],
    ['_partition', '2'],
    ['_offset', '3'],
  ]);
  for (const from of [0, 100_000, 200_000]) {
    await raceInserts(target, from);
    expect(await countIn(target, from)).toBe(ROWS);
  }
}, 120_000);

test('a table created without the key (before it was set at creation) gets it at the first insert-if-absent', async () => {
  const target: LanceTarget = { uri: path.join(dir, 'lance'), table: 'logs' };
  const db = await lancedb.connect(target.uri);
  await db.createEmptyTable('logs', TEST_SCHEMA);
  db.close();
  for (const from of [0, 100_000]) {
    await raceInserts(target, from);
    expect(await countIn(target, from)).toBe(ROWS);
  }
}, 120_000);
