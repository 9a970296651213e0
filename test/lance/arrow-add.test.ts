/**
 * Appends through LanceDB's native table (src/lance/arrow-add.ts) write what LanceDB's
 * public `add` writes, into a real table on disk, and are used only where they may be.
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import {
  Field,
  Float64,
  Int32,
  Schema,
  Table as ArrowTable,
  Utf8,
  tableFromArrays,
  vectorFromArray,
} from 'apache-arrow';
import { ARROW_ADD_LANCEDB_VERSION, appendArrowTable, takesArrowAdd } from '../../src/lance/arrow-add';
import { tempDir } from '../support/rows';

function rows(from: number, count: number): ArrowTable {
  const ids = Array.from({ length: count }, (_, i) => from + i);
  return new ArrowTable({
    id: vectorFromArray(ids, new Int32()),
    name: vectorFromArray(
      ids.map((i) => (i % 3 === 0 ? null : `row ${i} é`)),
      new Utf8(),
    ),
    score: vectorFromArray(
      ids.map((i) => i / 4),
      new Float64(),
    ),
  });
}

const sorted = async (table: lancedb.Table) =>
  ((await table.query().toArray()) as { id: number; name: string | null; score: number }[])
    .map((r) => ({ id: r.id, name: r.name, score: r.score }))
    .sort((a, b) => a.id - b.id);

test('appends through the native table give the rows and versions of the public add', async () => {
  const dir = await tempDir('arrow-add');
  const db = await lancedb.connect(path.join(dir, 'lance'));
  const direct = await db.createTable('direct', rows(0, 1));
  const reference = await db.createTable('reference', rows(0, 1));
  expect(await takesArrowAdd(direct)).toBe(true);

  const a = await appendArrowTable(direct, rows(1, 500), true);
  const b = await appendArrowTable(reference, rows(1, 500), false);
  expect(a.version).toBe(b.version);
  expect(a.version).toBe(2);
  expect(await sorted(direct)).toEqual(await sorted(reference));
  expect(await direct.countRows()).toBe(501);
  expect(await direct.countRows('name IS NULL')).toBe(167);
});

test('a table with embedding functions keeps the public add (it computes vectors first)', async () => {
  const dir = await tempDir('arrow-add-embeddings');
  const db = await lancedb.connect(path.join(dir, 'lance'));
  const schema = new Schema([new Field('id', new Int32(), true)], new Map([['embedding_functions', '[]']]));
  const table = await db.createEmptyTable('embedded', schema);
  expect(await takesArrowAdd(table)).toBe(false);
  const plain = await db.createTable('plain', tableFromArrays({ id: Int32Array.from([1]) }));
  expect(await takesArrowAdd(plain)).toBe(true);
});

test('the native table is called only on the LanceDB version it was read from', () => {
  // A LanceDB upgrade must re-read its add (arrow.js fromTableToBuffer, table.js add) before
  // raising this: until then every append takes the public add.
  const pinned = (
    JSON.parse(readFileSync('package.json', 'utf8')) as { dependencies: Record<string, string> }
  ).dependencies['@lancedb/lancedb'];
  expect(pinned).toBe(ARROW_ADD_LANCEDB_VERSION);
});
