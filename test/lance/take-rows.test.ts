import {
  Binary,
  Bool,
  Field,
  FixedSizeList,
  Float32,
  Int32,
  Int64,
  List,
  RecordBatch,
  Schema,
  Struct,
  TimeUnit,
  Timestamp,
  Utf8,
  makeData,
  vectorFromArray,
  type DataType,
} from 'apache-arrow';
import { takeRows } from '../../src/lance/take-rows';

/**
 * An upsert publication's kept rows are copied into one batch by takeRows: every column
 * type a decoder makes must come out with the same values and nulls as the rows it took,
 * also from a batch that is itself a slice (non-zero offsets, as staged batches can be).
 */
const point = new Struct([new Field('x', new Int32(), true), new Field('label', new Utf8(), true)]);
const vector = new FixedSizeList(3, new Field('item', new Float32(), true));
const list = new List(new Field('item', new Utf8(), true));
const fields: [string, DataType, (i: number) => unknown][] = [
  ['b', new Bool(), (i) => (i % 5 === 0 ? null : i % 2 === 0)],
  ['i', new Int32(), (i) => (i % 7 === 0 ? null : i * 3)],
  ['l', new Int64(), (i) => BigInt(i) * 10_000_000_000n],
  ['t', new Timestamp(TimeUnit.MILLISECOND), (i) => 1_700_000_000_000 + i],
  ['s', new Utf8(), (i) => (i % 4 === 0 ? null : `text ${'é'.repeat(i % 3)} ${i}`)],
  ['bin', new Binary(), (i) => (i % 6 === 0 ? null : new Uint8Array([i, i + 1, i + 2].map((x) => x % 256)))],
  ['v', vector, (i) => (i % 8 === 0 ? null : [i, i + 0.5, -i])],
  ['tags', list, (i) => (i % 9 === 0 ? null : Array.from({ length: i % 3 }, (_, k) => `t${i}-${k}`))],
  ['p', point, (i) => (i % 10 === 0 ? null : { x: i % 3 === 0 ? null : i, label: `p${i}` })],
];

function batchOf(n: number): RecordBatch {
  const schema = new Schema(fields.map(([name, type]) => new Field(name, type, true)));
  const children = fields.map(
    ([, type, value]) =>
      vectorFromArray(
        Array.from({ length: n }, (_, i) => value(i)),
        type,
      ).data[0]!,
  );
  return new RecordBatch(
    schema,
    makeData({ type: new Struct(schema.fields), length: n, nullCount: 0, children }),
  );
}

/** A row's values as plain JSON-able data. */
function plain(batch: RecordBatch, row: number): unknown[] {
  return batch.schema.fields.map((f) => {
    const v = batch.getChild(f.name)!.get(row) as unknown;
    if (v === null || v === undefined) return null;
    if (typeof v === 'bigint') return v.toString();
    if (v instanceof Uint8Array) return [...v];
    if (typeof v === 'object' && 'toJSON' in v) return JSON.parse(JSON.stringify(v)) as unknown;
    if (typeof v === 'object' && Symbol.iterator in v) return [...(v as Iterable<unknown>)];
    return v;
  });
}

test.each([
  ['a whole batch', 0],
  ['a slice of a batch', 13],
])('rows taken from %s keep their values and nulls, every column type', (_, offset) => {
  const whole = batchOf(120);
  const source = offset === 0 ? whole : whole.slice(offset, offset + 90);
  const rows = [0, 1, 2, 5, 8, 9, 10, 30, 31, 32, 33, 60, 61, 88, 89];
  const taken = takeRows(source, rows);
  expect(taken.numRows).toBe(rows.length);
  rows.forEach((r, i) => expect(plain(taken, i)).toEqual(plain(source, r)));
  for (const f of source.schema.fields) {
    const nulls = rows.filter((r) => source.getChild(f.name)!.get(r) === null).length;
    expect([f.name, taken.getChild(f.name)!.nullCount]).toEqual([f.name, nulls]);
  }
});
