import * as avro from 'avsc';
import { resolveConsumer } from '../../src/config';
import { avroPayloads } from '../../src/decode/avro/writer-schemas';
import { RecordDecoder } from '../../src/decode/record-decoder';
import type { WriterSchema } from '../../src/schema-registry/wire-format';
import { framed, plainColumn } from '../support/avro-fixtures';
import { column, NOW } from './fixture';

/**
 * Debezium change events written by Kafka Connect's AvroConverter through the registry: the
 * envelope's `after` record gives the columns, with Debezium's temporal types and Connect's
 * decimal mapped as what they mean; keys are Avro records of the primary key. The schemas
 * are those Debezium 3.6's PostgreSQL connector registered for
 * `(id int PRIMARY KEY, name text NOT NULL, amount numeric(12,2), created timestamp,
 * createdz timestamptz, day date, note text)` (trimmed of source fields nothing reads).
 */
const KEY = {
  type: 'record',
  name: 'Key',
  namespace: 'pg.public.t',
  fields: [{ name: 'id', type: 'int' }],
  'connect.name': 'pg.public.t.Key',
};
const VALUE_RECORD = {
  type: 'record',
  name: 'Value',
  fields: [
    { name: 'id', type: 'int' },
    { name: 'name', type: 'string' },
    {
      name: 'amount',
      type: [
        'null',
        {
          type: 'bytes',
          scale: 2,
          precision: 12,
          'connect.version': 1,
          'connect.parameters': { scale: '2', 'connect.decimal.precision': '12' },
          'connect.name': 'org.apache.kafka.connect.data.Decimal',
          logicalType: 'decimal',
        },
      ],
      default: null,
    },
    {
      name: 'created',
      type: [
        'null',
        { type: 'long', 'connect.version': 1, 'connect.name': 'io.debezium.time.MicroTimestamp' },
      ],
      default: null,
    },
    {
      name: 'createdz',
      type: [
        'null',
        { type: 'string', 'connect.version': 1, 'connect.name': 'io.debezium.time.ZonedTimestamp' },
      ],
      default: null,
    },
    {
      name: 'day',
      type: ['null', { type: 'int', 'connect.version': 1, 'connect.name': 'io.debezium.time.Date' }],
      default: null,
    },
    { name: 'note', type: ['null', 'string'], default: null },
  ],
  'connect.name': 'pg.public.t.Value',
};
const ENVELOPE = {
  type: 'record',
  name: 'Envelope',
  namespace: 'pg.public.t',
  fields: [
    { name: 'before', type: ['null', VALUE_RECORD], default: null },
    { name: 'after', type: ['null', 'Value'], default: null },
    {
      name: 'source',
      type: {
        type: 'record',
        name: 'Source',
        namespace: 'io.debezium.connector.postgresql',
        fields: [
          { name: 'version', type: 'string' },
          { name: 'ts_ms', type: 'long' },
          { name: 'lsn', type: ['null', 'long'], default: null },
        ],
      },
    },
    { name: 'op', type: 'string' },
    { name: 'ts_ms', type: ['null', 'long'], default: null },
  ],
  'connect.name': 'pg.public.t.Envelope',
};

const KEY_ID = 1;
const VALUE_ID = 2;
const schemas: WriterSchema[] = [
  { id: KEY_ID, schemaType: 'AVRO', schema: JSON.stringify(KEY) },
  { id: VALUE_ID, schemaType: 'AVRO', schema: JSON.stringify(ENVELOPE) },
];
const envelopeType = avro.Type.forSchema(ENVELOPE as avro.Schema, { wrapUnions: true });
const keyType = avro.Type.forSchema(KEY as avro.Schema);

interface Row {
  id: number;
  name: string;
  amount?: Buffer | null;
  created?: number | null;
  createdz?: string | null;
  day?: number | null;
  note?: string | null;
}
/** A row as avsc writes a union branch: `{ <branch>: value }`. */
const wrapped = (r: Row | null) =>
  r && {
    'pg.public.t.Value': {
      id: r.id,
      name: r.name,
      amount: r.amount == null ? null : { bytes: r.amount },
      created: r.created == null ? null : { long: r.created },
      createdz: r.createdz == null ? null : { string: r.createdz },
      day: r.day == null ? null : { int: r.day },
      note: r.note == null ? null : { string: r.note },
    },
  };
const value = (op: string, before: Row | null, after: Row | null, lsn = 100) =>
  framed(
    VALUE_ID,
    new Uint8Array(
      envelopeType.toBuffer({
        before: wrapped(before),
        after: wrapped(after),
        source: { version: '3.6.1.Final', ts_ms: NOW, lsn: { long: lsn } },
        op,
        ts_ms: { long: NOW },
      }),
    ),
  );
const key = (id: number) => framed(KEY_ID, new Uint8Array(keyType.toBuffer({ id })));
const record = (offset: number, v: Uint8Array | null, k: Uint8Array | null) => ({
  offsetNumber: offset,
  timestampNumber: NOW + offset,
  key: k,
  value: v,
});

/** An Avro long as a BigInt, for writing values beyond 2^53. */
const BIG_LONG = avro.types.LongType.__with({
  fromBuffer: (buf: Buffer) => buf.readBigInt64LE(),
  toBuffer: (n: bigint) => {
    const buf = Buffer.alloc(8);
    buf.writeBigInt64LE(n);
    return buf;
  },
  fromJSON: (n: number | string) => BigInt(n),
  toJSON: (n: bigint) => Number(n),
  isValid: (n: unknown) => typeof n === 'bigint',
  compare: (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0),
});

const decoder = (extra: Record<string, unknown> = {}) =>
  new RecordDecoder(
    resolveConsumer(
      {
        name: 't',
        brokers: ['b:1'],
        topics: ['pg.public.t'],
        format: 'avro',
        keyFormat: 'avro',
        schemaRegistry: { url: 'http://registry:8081' },
        schema: 'infer',
        mode: 'upsert',
        key: { fields: ['id'] },
        envelope: 'debezium',
        ...extra,
      },
      'test',
    ),
    () => NOW,
  );

// 12.34 as Avro's decimal: the unscaled 1234, big-endian two's complement.
const cents = (n: number) => Buffer.from([(n >> 8) & 0xff, n & 0xff]);
const ANN: Row = {
  id: 1,
  name: 'Ann',
  amount: cents(1234),
  created: Date.UTC(2024, 0, 2, 3, 4, 5) * 1000 + 123_456,
  createdz: '2024-01-02T01:04:05.123456Z',
  day: 19_724,
  note: 'first',
};

test("the columns are the envelope's after record, with Debezium's temporal types and Connect's decimal as what they mean", () => {
  const out = decoder().decode('pg.public.t', 0, [record(0, value('r', null, ANN), key(1))], '', schemas);
  expect(out.deadLetters).toEqual([]);
  const batch = out.batch!;
  const types = Object.fromEntries(
    ['id', 'name', 'amount', 'created', 'createdz', 'day', 'note'].map((n) => [
      n,
      String(batch.schema.fields.find((f) => f.name === n)!.type),
    ]),
  );
  expect(types).toEqual({
    id: 'Int32',
    name: 'Utf8',
    amount: 'Decimal[12e+2]', // Arrow prints precision 12, scale 2 so
    created: 'Timestamp<MICROSECOND>',
    createdz: 'Timestamp<MICROSECOND, UTC>',
    day: 'Date32<DAY>',
    note: 'Utf8',
  });
  // The envelope's own fields are no columns.
  expect(batch.schema.fields.map((f) => f.name)).not.toContain('op');
  expect(batch.schema.fields.map((f) => f.name)).not.toContain('source');
  expect(plainColumn(batch, 'created')).toEqual([BigInt(ANN.created!)]);
  expect(plainColumn(batch, 'createdz')).toEqual([BigInt(Date.UTC(2024, 0, 2, 1, 4, 5)) * 1000n + 123_456n]);
  expect(plainColumn(batch, 'day')).toEqual([19_724]);
  expect(plainColumn(batch, 'amount')).toEqual(['12.34']);
  // The key is the table's primary key: never null; the other columns take a delete's nulls.
  expect(
    batch.schema.fields.filter((f) => !f.nullable && !f.name.startsWith('_')).map((f) => f.name),
  ).toEqual(['id']);
});

test('create, update, delete (its key from before) and the tombstone after it (its key from the Avro record key) become rows and delete rows, ordered by source.lsn', () => {
  const out = decoder({ sequence: 'source.lsn' }).decode(
    'pg.public.t',
    0,
    [
      record(0, value('c', null, ANN, 10), key(1)),
      record(1, value('u', ANN, { ...ANN, name: 'Ann B', amount: cents(-5) }, 20), key(1)),
      record(2, value('d', { ...ANN, name: 'Ann B' }, null, 30), key(1)),
      record(3, null, key(1)),
    ],
    '',
    schemas,
  );
  expect(out.deadLetters).toEqual([]);
  const batch = out.batch!;
  expect(column(batch, 'id')).toEqual([1, 1, 1, 1]);
  expect(column(batch, 'name')).toEqual(['Ann', 'Ann B', null, null]);
  expect(plainColumn(batch, 'amount')).toEqual(['12.34', '-0.05', null, null]);
  expect(column(batch, '_deleted')).toEqual([false, false, true, true]);
  // The LSN of each event (exact, as int64); the tombstone has none and is ordered by its offset.
  expect(column(batch, '_sequence')).toEqual([10n, 20n, 30n, null]);
});

test("a tombstone that is the first record a replica reads (a compacted topic's) takes the key's column from the key schema", () => {
  const out = decoder().decode(
    'pg.public.t',
    0,
    [record(0, null, key(7)), record(1, value('c', null, ANN), key(1))],
    '',
    schemas,
  );
  expect(out.deadLetters).toEqual([]);
  const batch = out.batch!;
  expect(column(batch, 'id')).toEqual([7, 1]);
  expect(column(batch, '_deleted')).toEqual([true, false]);
  expect(String(batch.schema.fields.find((f) => f.name === 'id')!.type)).toBe('Int32');
});

test('a delete without before takes its key from the Avro record key; a tombstone without a key is a dead letter', () => {
  const out = decoder().decode(
    'pg.public.t',
    0,
    [
      record(0, value('d', null, null), key(9)),
      record(1, null, null),
      record(2, value('d', null, null), null),
    ],
    '',
    schemas,
  );
  expect(column(out.batch!, 'id')).toEqual([9]);
  expect(out.deadLetters.map((d) => [d.offset, d.reason])).toEqual([
    [1, 'missing-key'],
    [2, 'missing-key'],
  ]);
});

test("a delete without before whose record key the registry cannot read is a dead letter with the registry's reason, not a missing key", () => {
  const out = decoder().decode(
    'pg.public.t',
    0,
    [record(0, value('d', null, null), framed(77, key(9).slice(5)))],
    '',
    schemas,
  );
  expect(out.batch).toBeUndefined();
  expect(out.deadLetters.map((d) => [d.offset, d.reason])).toEqual([[0, 'unknown-schema-id']]);
  expect(out.deadLetters[0]!.detail).toContain('the record key');
});

test('JSON values with Avro keys (JsonConverter and AvroConverter): a tombstone before and after events deletes its key in the declared column, never a second column of it', () => {
  const json = new RecordDecoder(
    resolveConsumer(
      {
        name: 't',
        brokers: ['b:1'],
        topics: ['pg.public.t'],
        format: 'json',
        keyFormat: 'avro',
        schemaRegistry: { url: 'http://registry:8081' },
        schema: { fields: { id: 'int32', name: 'string' } },
        mode: 'upsert',
        key: { fields: ['id'] },
        envelope: 'debezium',
      },
      'test',
    ),
    () => NOW,
  );
  const change = (op: string, id: number) =>
    new TextEncoder().encode(
      JSON.stringify({ before: null, after: { id, name: 'Ann' }, op, source: { lsn: 1 } }),
    );
  for (const batch of [
    [record(0, null, key(1)), record(1, change('c', 2), key(2))],
    [record(2, change('u', 2), key(2)), record(3, null, key(2))],
  ]) {
    const out = json.decode('pg.public.t', 0, batch, '', schemas);
    expect(out.deadLetters).toEqual([]);
    const names = out.batch!.schema.fields.map((f) => f.name).filter((n) => !n.startsWith('_'));
    expect(names).toEqual(['id', 'name']);
    expect(column(out.batch!, 'id')).toEqual(batch.map((r) => (r.offsetNumber === 0 ? 1 : 2)));
  }
});

test("a TOASTed placeholder in a string column is staged for the merge to keep the stored value; in a create (a primary-key update's) it is a dead letter", () => {
  const toasted = { ...ANN, note: '__debezium_unavailable_value' };
  const out = decoder().decode(
    'pg.public.t',
    0,
    [
      record(0, value('u', null, toasted), key(1)),
      record(1, value('c', null, { ...toasted, id: 2 }), key(2)),
    ],
    '',
    schemas,
  );
  expect(column(out.batch!, 'note')).toEqual(['__debezium_unavailable_value']);
  expect(out.deadLetters.map((d) => [d.offset, d.reason, d.field])).toEqual([
    [1, 'unavailable-value', 'note'],
  ]);
});

test('a key field missing from the after record, or of a type no merge joins on, and an Avro value that is no envelope are dead letters naming why', () => {
  const plain = { type: 'record', name: 'Plain', fields: [{ name: 'id', type: 'int' }] };
  const floatKey = {
    ...ENVELOPE,
    fields: ENVELOPE.fields.map((f) =>
      f.name === 'before'
        ? { ...f, type: ['null', { ...VALUE_RECORD, fields: [{ name: 'id', type: 'double' }] }] }
        : f,
    ),
  };
  const more: WriterSchema[] = [
    { id: 5, schemaType: 'AVRO', schema: JSON.stringify(plain) },
    { id: 6, schemaType: 'AVRO', schema: JSON.stringify(floatKey) },
  ];
  const float = avro.Type.forSchema(floatKey as avro.Schema, { wrapUnions: true });
  const out = decoder({ key: { fields: ['id'] } }).decode(
    'pg.public.t',
    0,
    [
      record(
        0,
        framed(5, new Uint8Array(avro.Type.forSchema(plain as avro.Schema).toBuffer({ id: 1 }))),
        key(1),
      ),
      record(
        1,
        framed(
          6,
          new Uint8Array(
            float.toBuffer({
              before: null,
              after: { 'pg.public.t.Value': { id: 1.5 } },
              source: { version: 'x', ts_ms: NOW, lsn: null },
              op: 'c',
              ts_ms: null,
            }),
          ),
        ),
        key(1),
      ),
    ],
    '',
    [...schemas, ...more],
  );
  expect(out.batch).toBeUndefined();
  expect(out.deadLetters.map((d) => [d.offset, d.reason, d.field])).toEqual([
    [0, 'not-a-change-event', undefined],
    [1, 'schema-mismatch', 'id'],
  ]);
  const missing = decoder({ key: { fields: ['tenant'] } }).decode(
    'pg.public.t',
    0,
    [record(0, value('c', null, ANN), key(1))],
    '',
    schemas,
  );
  expect(missing.deadLetters.map((d) => [d.reason, d.field])).toEqual([['schema-mismatch', 'tenant']]);
});

const FLAT = {
  type: 'record',
  name: 'Value',
  namespace: 'pg.public.t',
  fields: [
    { name: 'id', type: 'int' },
    { name: 'ms', type: { type: 'long', 'connect.name': 'io.debezium.time.Timestamp' } },
    { name: 'ns', type: { type: 'long', 'connect.name': 'io.debezium.time.NanoTimestamp' } },
    { name: 'day', type: { type: 'int', 'connect.name': 'io.debezium.time.Date' } },
    { name: 'us_time', type: { type: 'long', 'connect.name': 'io.debezium.time.MicroTime' } },
    {
      name: 'ratio',
      type: {
        type: 'record',
        name: 'VariableScaleDecimal',
        namespace: 'io.debezium.data',
        fields: [
          { name: 'scale', type: 'int' },
          { name: 'value', type: 'bytes' },
        ],
        'connect.name': 'io.debezium.data.VariableScaleDecimal',
      },
    },
    {
      name: 'price',
      type: {
        type: 'bytes',
        'connect.name': 'org.apache.kafka.connect.data.Decimal',
        'connect.parameters': { scale: '3' },
      },
    },
  ],
};
/** A flattened Debezium row (ExtractNewRecordState) in FLAT's schema, framed with id 9. */
const flatRow = (ratio: { scale: number; value: Buffer } = { scale: 4, value: Buffer.from([0xfe, 0x0c]) }) =>
  framed(
    9,
    new Uint8Array(
      avro.Type.forSchema(
        // The same bytes from longs that take a BigInt (avsc's own refuses one beyond 2^53).
        JSON.parse(JSON.stringify(FLAT).replace(/\{"type":"long"[^}]*\}/g, '"long"')) as avro.Schema,
        { registry: { long: BIG_LONG } },
      ).toBuffer({
        id: 1,
        ms: 1_700_000_000_123n,
        ns: 1_700_000_000_123_456_789n,
        day: 3,
        us_time: 45_296_000_001n,
        // -0.0500 at its own scale.
        ratio,
        price: Buffer.from([0x30, 0x39]),
      }),
    ),
  );
const FLAT_SCHEMAS = [{ id: 9, schemaType: 'AVRO', schema: JSON.stringify(FLAT) }];

test("a plain Avro consumer keeps Connect's annotated types as their Avro base types, the columns a table created before the Debezium mapping has", () => {
  const out = new RecordDecoder(
    resolveConsumer(
      {
        name: 'flat',
        brokers: ['b:1'],
        topics: ['flat'],
        format: 'avro',
        schemaRegistry: { url: 'http://registry:8081' },
        schema: 'infer',
      },
      'test',
    ),
    () => NOW,
  ).decode('flat', 0, [record(0, flatRow(), null)], '', FLAT_SCHEMAS);
  expect(out.deadLetters).toEqual([]);
  const batch = out.batch!;
  const type = (n: string) => String(batch.schema.fields.find((f) => f.name === n)!.type);
  expect(['ms', 'ns', 'day', 'us_time', 'ratio', 'price'].map(type)).toEqual([
    'Int64',
    'Int64',
    'Int32',
    'Int64',
    'Struct<{scale:Int32, value:Binary}>',
    'Binary',
  ]);
  expect(plainColumn(batch, 'ns')).toEqual([1_700_000_000_123_456_789n]);
});

test("under the Debezium envelope Connect's types are what they mean: Debezium's temporal types, its variable-scale numeric as exact text, and a Connect decimal without Avro's logical type", () => {
  const payloads = avroPayloads({ connectTypes: true });
  const parsed = payloads.parse(JSON.stringify(FLAT), []);
  const read = payloads.decode(parsed, flatRow());
  if ('reason' in read) throw new Error(read.detail);
  expect(read.fields.map((f) => [f.name, f.type, 'unit' in f ? f.unit : undefined])).toEqual([
    ['id', 'int32', undefined],
    ['ms', 'timestamp', 'ms'],
    ['ns', 'timestamp', 'ns'],
    ['day', 'date', undefined],
    ['us_time', 'int64', undefined],
    ['ratio', 'string', undefined],
    ['price', 'decimal', undefined],
  ]);
  // Exact beyond 2^53: a nanosecond timestamp of this century.
  expect(read.row.ns).toBe(1_700_000_000_123_456_789n);
  expect(read.row.ratio).toBe('-0.0500');
  expect(read.row.price).toBe('12345e-3');
});

test("a numeric of PostgreSQL's full length converts exactly; an unscaled value longer than any numeric is a dead letter before it is converted", () => {
  const payloads = avroPayloads({ connectTypes: true });
  const parsed = payloads.parse(JSON.stringify(FLAT), []);
  // 2^(8 * 60,000): a 60,000-byte unscaled value, about 144,500 digits.
  const big = Buffer.alloc(60_001);
  big[0] = 0x01;
  const read = payloads.decode(parsed, flatRow({ scale: 0, value: big }));
  if ('reason' in read) throw new Error(read.detail);
  expect(read.row.ratio).toBe(String(1n << 480_000n));
  // Negative, two's complement: -2^(8 * 60,000).
  const negative = Buffer.alloc(60_001, 0);
  negative[0] = 0xff;
  const readNegative = payloads.decode(parsed, flatRow({ scale: 0, value: negative }));
  if ('reason' in readNegative) throw new Error(readNegative.detail);
  expect(readNegative.row.ratio).toBe(String(-(1n << 480_000n)));
  // A MiB: converting it byte by byte took minutes; it is refused unread.
  const huge = payloads.decode(parsed, flatRow({ scale: 0, value: Buffer.alloc(1 << 20, 0x7f) }));
  expect(huge).toMatchObject({ reason: 'undecodable-payload' });
  expect('detail' in huge && huge.detail).toContain('VariableScaleDecimal of 1048576 bytes');
});

test('a decimal(p ≤ 38) written in more bytes than Decimal128 holds is a dead letter naming its length', () => {
  const schema = {
    type: 'record',
    name: 'R',
    fields: [{ name: 'd', type: { type: 'bytes', logicalType: 'decimal', precision: 38, scale: 2 } }],
  };
  const payloads = avroPayloads();
  const parsed = payloads.parse(JSON.stringify(schema), []);
  const write = (d: Buffer) =>
    framed(3, new Uint8Array(avro.Type.forSchema(schema as avro.Schema).toBuffer({ d })));
  const fits = payloads.decode(parsed, write(Buffer.from([0xff, 0xfe])));
  expect('row' in fits && fits.row.d).toBe('-2e-2');
  const long = payloads.decode(parsed, write(Buffer.alloc(96 * 1024, 0x11)));
  expect(long).toMatchObject({ reason: 'undecodable-payload' });
  expect('detail' in long && long.detail).toContain('decimal(38, 2) of 98304 bytes');
});

test('a truncate applied, even as the first event a decoder sees, is a delete row without a key carrying its LSN; refused by default, a dead letter', () => {
  const truncate = record(0, value('t', null, null, 55), null);
  const applied = decoder({ truncate: 'apply', sequence: 'source.lsn' }).decode(
    'pg.public.t',
    0,
    [truncate, record(1, value('c', null, ANN, 60), key(1))],
    '',
    schemas,
  );
  expect(applied.deadLetters).toEqual([]);
  expect(column(applied.batch!, '_deleted')).toEqual([true, false]);
  expect(column(applied.batch!, 'id')).toEqual([null, 1]);
  expect(column(applied.batch!, '_sequence')).toEqual([55n, 60n]);
  const refused = decoder().decode('pg.public.t', 0, [truncate], '', schemas);
  expect(refused.deadLetters.map((d) => d.reason)).toEqual(['debezium-truncate']);
});
