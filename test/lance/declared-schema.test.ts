import { execFile, spawnSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import * as lancedb from '@lancedb/lancedb';
import { DataType, type Table as ArrowTable, type Vector } from 'apache-arrow';
import { recordOffset } from '../../src/common/offsets';
import { resolveConsumer, type ConsumerDefinitionInput, type ResolvedConsumer } from '../../src/config';
import { parseJsonExact } from '../../src/decode/exact-json';
import { RecordDecoder } from '../../src/decode/record-decoder';
import { declaredTypeChanges } from '../../src/lance/declared-schema';
import { readTableSchema } from '../../src/lance/known-fields';
import {
  TABLE,
  TOPIC,
  openFixtureStaging,
  openMaterializer,
  ownershipOf,
} from '../support/materializer-fixture';
import { ensureIndependentReader, VENV } from '../../qualify/support/independent-reader';
import { QUALIFY_DIR } from '../../qualify/support/paths';
import { tempDir } from '../support/rows';

/**
 * Every declared type from JSON through a staging part and a publication into Lance,
 * read back by LanceDB for Node with exact values: nulls, nested nulls, empty lists.
 */

const chain = [{ owner: 'A', epoch: 1, start: 0 }];

const FIELDS = {
  id: { type: 'int32', nullable: false },
  emb: { type: 'vector', dim: 4 },
  emb16: { type: 'vector', dim: 2, element: 'float16' },
  bits: { type: 'vector', dim: 3, element: 'uint8' },
  f32: 'float32',
  i8: 'int8',
  i16: 'int16',
  u8: 'uint8',
  u16: 'uint16',
  u32: 'uint32',
  u64: 'uint64',
  day: 'date',
  ts_us: { type: 'timestamp', unit: 'us', timezone: 'UTC' },
  ts_ns: { type: 'timestamp', unit: 'ns' },
  bin: 'binary',
  price: { type: 'decimal', precision: 12, scale: 3 },
  tags: { type: 'list', items: 'string' },
  matrix: { type: 'list', items: { type: 'list', items: 'int32' } },
  doc: {
    type: 'struct',
    fields: {
      title: 'string',
      meta: { type: 'struct', fields: { n: 'int16', at: { type: 'timestamp', unit: 'us' } } },
      scores: { type: 'list', items: 'float32' },
    },
  },
  ls: 'large_string',
  lb: 'large_binary',
} as const;

function consumer(fields: Record<string, unknown>): ResolvedConsumer {
  const input: ConsumerDefinitionInput = {
    name: 'types',
    brokers: ['127.0.0.1:1'],
    topics: [TOPIC],
    table: TABLE,
    schema: { fields: fields as never },
  };
  return resolveConsumer(input, 'test');
}

const f32bytes = (values: number[]) => Buffer.from(new Float32Array(values).buffer).toString('base64');

const RECORDS: Record<string, unknown>[] = [
  {
    id: 0,
    emb: [1, 0, 0, 0],
    emb16: [0.5, -2],
    bits: 'AQID',
    f32: 1.25,
    i8: -128,
    i16: 32767,
    u8: 255,
    u16: 65535,
    u32: 4294967295,
    u64: '18446744073709551615',
    day: '2024-02-29',
    ts_us: '2024-01-01T00:00:00.123456Z',
    ts_ns: 'TS_NS', // replaced by an integer literal beyond 2^53 below
    bin: 'AAEC/w==',
    price: '-123456789.125',
    tags: ['a', 'é', ''],
    matrix: [[1, 2], [3]],
    doc: { title: 't', meta: { n: -5, at: 1704067200123456 }, scores: [0.5, 1.5] },
    ls: 'large',
    lb: 'AAAA',
  },
  { id: 1 },
  {
    id: 2,
    emb: f32bytes([0, 1, 0, 0]),
    tags: [],
    matrix: [[], null, [7]],
    doc: { title: null, meta: null, scores: [] },
    price: 0.5,
    u64: 0,
  },
];
// The JSON reader keeps integer literals beyond 2^53 exact (exact-json.ts): one in the text.
const TEXTS = RECORDS.map((r) => JSON.stringify(r).replace('"TS_NS"', '1704067200123456789'));

let dir: string;
let tableDir: string;
let lanceDir: string;
beforeEach(async () => {
  dir = await tempDir('kl-types');
  tableDir = path.join(dir, 'staging', TABLE);
  lanceDir = path.join(dir, 'lance');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

/** Decodes the texts, stages them as one sealed part, publishes it, and returns the table as LanceDB reads it. */
async function roundTrip(c: ResolvedConsumer, texts: readonly string[], from = 0): Promise<ArrowTable> {
  const decoded = new RecordDecoder(c).decode(
    TOPIC,
    0,
    texts.map((t, i) => ({
      offsetNumber: from + i,
      timestampNumber: 1_764_504_000_000,
      key: null,
      value: Buffer.from(t),
    })),
  );
  expect(decoded.deadLetters).toEqual([]);
  const staging = await openFixtureStaging(tableDir);
  staging.push({
    topic: TOPIC,
    partition: 0,
    batch: decoded.batch!,
    minute: decoded.minute,
    handledThrough: recordOffset(from + texts.length - 1),
  });
  await staging.close();
  const m = await openMaterializer(tableDir, lanceDir);
  m.setOwnership(ownershipOf(1, chain, from + texts.length));
  const results = await m.runOnce();
  expect(results.reduce((n, r) => n + r.rows, 0)).toBe(texts.length);
  m.close();
  return readTable();
}

async function readTable(): Promise<ArrowTable> {
  const db = await lancedb.connect(lanceDir);
  const table = await db.openTable(TABLE);
  try {
    return await table.query().toArrow();
  } finally {
    table.close();
    db.close();
  }
}

/** Row index by id (LanceDB returns rows in no promised order). */
function rowOf(table: ArrowTable, id: number): number {
  const ids = [...(table.getChild('id') as Vector)] as number[];
  return ids.indexOf(id);
}

/**
 * A value as plain JavaScript: vectors and lists as arrays, structs as objects, bytes as
 * base64. Methods are looked up, not tested with `in`: a StructRow is a Proxy whose
 * `has` answers for its fields only.
 */
function plain(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  if (typeof value !== 'object') return value;
  const methods = value as { toArray?: unknown; toJSON?: unknown; type?: unknown };
  if (typeof methods.toArray === 'function' && methods.type instanceof DataType)
    return [...(value as Vector)].map(plain);
  if (typeof methods.toJSON === 'function') {
    const json = (value as { toJSON(): Record<string, unknown> }).toJSON();
    return Object.fromEntries(Object.entries(json).map(([k, v]) => [k, plain(v)]));
  }
  return value;
}

function cell(table: ArrowTable, column: string, id: number): unknown {
  return plain((table.getChild(column) as Vector).get(rowOf(table, id)));
}

/** The stored 64-bit value of a timestamp row, exact (apache-arrow's get() turns it into float ms). */
function rawInt64(table: ArrowTable, column: string, id: number): bigint | null {
  let row = rowOf(table, id);
  for (const data of (table.getChild(column) as Vector).data) {
    if (row < data.length) return data.getValid(row) ? (data.values as BigInt64Array)[row]! : null;
    row -= data.length;
  }
  throw new Error('no such row');
}

test('every declared type round-trips from JSON through staging into Lance with exact values, nulls, nested nulls and empty lists', async () => {
  const c = consumer(FIELDS);
  const table = await roundTrip(c, TEXTS);
  expect(table.numRows).toBe(3);
  const types = Object.fromEntries(table.schema.fields.map((f) => [f.name, String(f.type)]));
  expect(types).toMatchObject({
    emb: 'FixedSizeList[4]<Float32>',
    emb16: 'FixedSizeList[2]<Float16>',
    bits: 'FixedSizeList[3]<Uint8>',
    f32: 'Float32',
    i8: 'Int8',
    u64: 'Uint64',
    day: 'Date32<DAY>',
    ts_us: 'Timestamp<MICROSECOND, UTC>',
    ts_ns: 'Timestamp<NANOSECOND>',
    bin: 'Binary',
    price: 'Decimal[12e+3]',
    tags: 'List<Utf8>',
    matrix: 'List<List<Int32>>',
    doc: 'Struct<{title:Utf8, meta:Struct<{n:Int16, at:Timestamp<MICROSECOND>}>, scores:List<Float32>}>',
    ls: 'LargeUtf8',
    lb: 'LargeBinary',
  });

  // Row 0: every value exact.
  expect(cell(table, 'emb', 0)).toEqual([1, 0, 0, 0]);
  expect(cell(table, 'emb16', 0)).toEqual([0.5, -2]);
  expect(cell(table, 'bits', 0)).toEqual([1, 2, 3]);
  expect(cell(table, 'f32', 0)).toBe(1.25);
  expect([0, 1, 2, 3, 4].map((i) => cell(table, ['i8', 'i16', 'u8', 'u16', 'u32'][i]!, 0))).toEqual([
    -128, 32767, 255, 65535, 4294967295,
  ]);
  expect(cell(table, 'u64', 0)).toBe(18446744073709551615n);
  expect(cell(table, 'day', 0)).toBe(Date.UTC(2024, 1, 29));
  expect(rawInt64(table, 'ts_us', 0)).toBe(1704067200123456n);
  expect(rawInt64(table, 'ts_ns', 0)).toBe(1704067200123456789n);
  expect(cell(table, 'bin', 0)).toBe('AAEC/w==');
  expect(String((table.getChild('price') as Vector).get(rowOf(table, 0)))).toBe('-123456789125');
  expect(cell(table, 'tags', 0)).toEqual(['a', 'é', '']);
  expect(cell(table, 'matrix', 0)).toEqual([[1, 2], [3]]);
  expect(cell(table, 'doc', 0)).toEqual({
    title: 't',
    meta: { n: -5, at: 1704067200123.456 },
    scores: [0.5, 1.5],
  });
  expect(cell(table, 'ls', 0)).toBe('large');
  expect(cell(table, 'lb', 0)).toBe('AAAA');

  // Row 1: every field absent → null.
  for (const name of Object.keys(FIELDS).filter((n) => n !== 'id'))
    expect([name, cell(table, name, 1)]).toEqual([name, null]);

  // Row 2: base64 vector, empty lists, null items, nested nulls, a decimal from a number.
  expect(cell(table, 'emb', 2)).toEqual([0, 1, 0, 0]);
  expect(cell(table, 'tags', 2)).toEqual([]);
  expect(cell(table, 'matrix', 2)).toEqual([[], null, [7]]);
  expect(cell(table, 'doc', 2)).toEqual({ title: null, meta: null, scores: [] });
  expect(String((table.getChild('price') as Vector).get(rowOf(table, 2)))).toBe('500');
  expect(cell(table, 'u64', 2)).toBe(0n);
});

test('LanceDB sees a declared vector as a vector column: a nearest-neighbour search finds the closest row', async () => {
  const c = consumer({
    id: 'int32',
    emb: { type: 'vector', dim: 4 },
    emb16: { type: 'vector', dim: 2, element: 'float16' },
  });
  const texts = Array.from({ length: 50 }, (_, i) =>
    JSON.stringify({ id: i, emb: [Math.cos(i), Math.sin(i), i / 50, 1], emb16: [i / 50, 1 - i / 50] }),
  );
  await roundTrip(c, texts);
  const db = await lancedb.connect(lanceDir);
  const table = await db.openTable(TABLE);
  try {
    const near = (await table
      .vectorSearch([Math.cos(17), Math.sin(17), 17 / 50, 1])
      .column('emb')
      .limit(3)
      .toArray()) as {
      id: number;
      _distance: number;
    }[];
    expect(near[0]!.id).toBe(17);
    expect(near[0]!._distance).toBeLessThan(1e-9);
    const half = (await table.vectorSearch([0.5, 0.5]).column('emb16').limit(1).toArray()) as {
      id: number;
    }[];
    expect(half[0]!.id).toBe(25);
  } finally {
    table.close();
    db.close();
  }
});

test('a new nullable field of any type becomes a new nullable column of the existing table; older rows read null', async () => {
  await roundTrip(consumer({ id: 'int32', name: 'string' }), [JSON.stringify({ id: 0, name: 'before' })]);
  const grown = consumer({
    id: 'int32',
    name: 'string',
    emb: { type: 'vector', dim: 3 },
    doc: { type: 'struct', fields: { a: 'int64', b: { type: 'list', items: 'date' } } },
    price: { type: 'decimal', precision: 5, scale: 2 },
  });
  const table = await roundTrip(
    grown,
    [
      JSON.stringify({
        id: 1,
        name: 'after',
        emb: [1, 2, 3],
        doc: { a: 7, b: ['2025-01-01', null] },
        price: '1.5',
      }),
    ],
    1,
  );
  const fields = new Map(table.schema.fields.map((f) => [f.name, f]));
  expect(String(fields.get('emb')?.type)).toBe('FixedSizeList[3]<Float32>');
  expect(fields.get('doc')?.nullable).toBe(true);
  expect(cell(table, 'emb', 0)).toBeNull();
  expect(cell(table, 'doc', 0)).toBeNull();
  expect(cell(table, 'emb', 1)).toEqual([1, 2, 3]);
  expect(cell(table, 'doc', 1)).toEqual({ a: 7n, b: [Date.UTC(2025, 0, 1), null] });
  expect(String((table.getChild('price') as Vector).get(rowOf(table, 1)))).toBe('150');
});

test('a declared field whose type changed is named with both types against the existing table', async () => {
  await roundTrip(consumer({ id: 'int32', emb: { type: 'vector', dim: 4 }, ts: 'timestamp' }), [
    JSON.stringify({ id: 0, emb: [1, 2, 3, 4], ts: 0 }),
  ]);
  const schema = await readTableSchema({ uri: lanceDir, table: TABLE });
  const changed = consumer({
    id: 'int64', // Int32 staged into Int64 is cast by LanceDB; the other way is not
    emb: { type: 'vector', dim: 8 },
    ts: { type: 'timestamp', unit: 'us' },
    extra: 'string', // new: becomes a column, no change
  });
  const changes = declaredTypeChanges(changed.fields!, schema!, TABLE, changed.epochUnit);
  expect(changes.map((c) => [c.field, c.declared, c.table])).toEqual([
    ['id', 'Int64', 'Int32'],
    ['emb', 'FixedSizeList[8]<Float32>', 'FixedSizeList[4]<Float32>'],
    ['ts', 'Timestamp<MICROSECOND>', 'Timestamp<MILLISECOND>'],
  ]);
  expect(changes[1]!.message).toContain('declared vector<float32>[8]');
  expect(changes[1]!.message).toContain(`column "emb" of Lance table ${TABLE} is FixedSizeList[4]<Float32>`);
  const same = consumer({ id: 'int32', emb: { type: 'vector', dim: 4 }, ts: 'timestamp' });
  expect(declaredTypeChanges(same.fields!, schema!, TABLE, same.epochUnit)).toEqual([]);
});

/**
 * pylance 12 (the Lance format LanceDB for Node 0.39 writes, read without LanceDB) in
 * qualify/.venv, made as the qualification makes it (from PyPI on first use).
 */
test('pylance reads every declared type back with the same exact values', async () => {
  await ensureIndependentReader(() => undefined);
  await roundTrip(consumer(FIELDS), TEXTS);
  const { stdout } = await promisify(execFile)(
    path.join(VENV, 'bin/python'),
    [path.join(QUALIFY_DIR, 'dump_columns.py'), '--dataset', path.join(lanceDir, `${TABLE}.lance`)],
    { maxBuffer: 16 * 1024 * 1024 },
  );
  // Parsed exactly: ns timestamps are beyond 2^53.
  const read = parseJsonExact(stdout) as { types: Record<string, string>; rows: Record<string, unknown>[] };
  expect(read.types).toMatchObject({
    emb: 'fixed_size_list<item: float>[4]',
    emb16: 'fixed_size_list<item: halffloat>[2]',
    bits: 'fixed_size_list<item: uint8>[3]',
    u64: 'uint64',
    day: 'date32[day]',
    ts_us: 'timestamp[us, tz=UTC]',
    ts_ns: 'timestamp[ns]',
    price: 'decimal128(12, 3)',
    matrix: 'list<item: list<item: int32>>',
    doc: 'struct<title: string, meta: struct<n: int16, at: timestamp[us]>, scores: list<item: float>>',
    ls: 'large_string',
    lb: 'large_binary',
  });
  const data = (row: Record<string, unknown>) =>
    Object.fromEntries(Object.entries(row).filter(([k]) => !k.startsWith('_')));
  const nulls = Object.fromEntries(Object.keys(FIELDS).map((k) => [k, null]));
  expect(read.rows.map(data)).toEqual([
    {
      id: 0,
      emb: [1, 0, 0, 0],
      emb16: [0.5, -2],
      bits: [1, 2, 3],
      f32: 1.25,
      i8: -128,
      i16: 32767,
      u8: 255,
      u16: 65535,
      u32: 4294967295,
      u64: '18446744073709551615',
      day: 19782,
      ts_us: 1704067200123456,
      ts_ns: 1704067200123456789n,
      bin: 'AAEC/w==',
      price: '-123456789.125',
      tags: ['a', 'é', ''],
      matrix: [[1, 2], [3]],
      doc: { title: 't', meta: { n: -5, at: 1704067200123456 }, scores: [0.5, 1.5] },
      ls: 'large',
      lb: 'AAAA',
    },
    { ...nulls, id: 1 },
    {
      ...nulls,
      id: 2,
      emb: [0, 1, 0, 0],
      tags: [],
      matrix: [[], null, [7]],
      doc: { title: null, meta: null, scores: [] },
      price: '0.500',
      u64: '0',
    },
  ]);
}, 600_000);

/** The environment without what would override the definition's brokers and data directory. */
function withoutOverrides(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { KAFKA_BOOTSTRAP_SERVERS: _s, KAFKA_BROKERS: _b, KAFKA_LANCE_DATA_DIR: _d, ...rest } = env;
  return rest;
}

test('kafka-lance run refuses a changed declared type at start, before Kafka, naming the field and both types', async () => {
  await roundTrip(consumer({ id: 'int32', emb: { type: 'vector', dim: 4 } }), [
    JSON.stringify({ id: 0, emb: [1, 2, 3, 4] }),
  ]);
  const definition = path.join(dir, 'changed.json');
  await fsp.writeFile(
    definition,
    JSON.stringify({
      name: 'types',
      brokers: ['127.0.0.1:1'], // never reached: the check comes first
      topics: [TOPIC],
      table: TABLE,
      dataDir: dir,
      schema: { fields: { id: 'int32', emb: { type: 'vector', dim: 8, element: 'float16' } } },
    }),
  );
  const out = spawnSync(
    process.execPath,
    [path.resolve(__dirname, '../../bin/kafka-lance'), 'run', '-c', definition],
    {
      encoding: 'utf8',
      env: withoutOverrides(process.env),
      timeout: 60_000,
    },
  );
  expect(out.status).toBe(2);
  expect(out.stderr).toContain(
    `schema.fields.emb: declared vector<float16>[8] (Arrow FixedSizeList[8]<Float16>), but column "emb" of Lance table ${TABLE} is FixedSizeList[4]<Float32>`,
  );
  expect(out.stderr).not.toContain('127.0.0.1:1');
}, 90_000);
