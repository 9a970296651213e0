/**
 * An Avro writer schema with every type the Avro mapping handles (src/decode/avro/
 * avro-mapping.ts), records of it, and what each column reads back as from Arrow and from
 * LanceDB. Shared by the decoder's unit tests and the registry round trip.
 */
export const EVERYTHING_SCHEMA = {
  type: 'record',
  name: 'Everything',
  namespace: 'com.acme',
  fields: [
    { name: 'b', type: 'boolean' },
    { name: 'i', type: 'int' },
    { name: 'l', type: 'long' },
    { name: 'f', type: 'float' },
    { name: 'd', type: 'double' },
    { name: 's', type: 'string' },
    { name: 'raw', type: 'bytes' },
    { name: 'opt', type: ['null', 'string'], default: null },
    { name: 'color', type: { type: 'enum', name: 'Color', symbols: ['RED', 'GREEN'] } },
    { name: 'hash', type: { type: 'fixed', name: 'Hash', size: 4 } },
    { name: 'price', type: { type: 'bytes', logicalType: 'decimal', precision: 10, scale: 2 } },
    { name: 'day', type: { type: 'int', logicalType: 'date' } },
    { name: 'tod', type: { type: 'int', logicalType: 'time-millis' } },
    { name: 'tod_us', type: { type: 'long', logicalType: 'time-micros' } },
    { name: 'ts_ms', type: { type: 'long', logicalType: 'timestamp-millis' } },
    { name: 'ts_us', type: { type: 'long', logicalType: 'timestamp-micros' } },
    { name: 'local_us', type: { type: 'long', logicalType: 'local-timestamp-micros' } },
    { name: 'id', type: { type: 'string', logicalType: 'uuid' } },
    { name: 'tags', type: { type: 'array', items: 'string' } },
    { name: 'attrs', type: { type: 'map', values: 'long' } },
    {
      name: 'point',
      type: {
        type: 'record',
        name: 'Point',
        fields: [
          { name: 'x', type: 'double' },
          { name: 'y', type: ['null', 'double'], default: null },
        ],
      },
    },
    { name: 'either', type: ['null', 'int', 'string', 'Point'], default: null },
  ],
} as const;

const TS_US = 1_764_676_800_123_456; // 2025-12-02T12:00:00.123456Z

/** Two records (values as avsc encodes them: unions unwrapped, bytes as Buffers, longs as numbers). */
export const EVERYTHING_RECORDS = [
  {
    b: true,
    i: -7,
    l: 4_503_599_627_370_496,
    f: 1.5,
    d: -2.25,
    s: 'héllo',
    raw: Buffer.from([0, 1, 2]),
    opt: 'set',
    color: 'GREEN',
    hash: Buffer.from([0xde, 0xad, 0xbe, 0xef]),
    price: Buffer.from([0x04, 0xe2]), // 1250 → 12.50
    day: 20_424, // 2025-12-02
    tod: 45_296_789, // 12:34:56.789
    tod_us: 45_296_789_012,
    ts_ms: 1_764_676_800_123,
    ts_us: TS_US,
    local_us: TS_US,
    id: '5f0c6c1e-8d2b-4a8e-9f55-2f1f0c3b9a10',
    tags: ['a', 'b'],
    attrs: { one: 1, two: 2 },
    point: { x: 1, y: null },
    either: 42,
  },
  {
    b: false,
    i: 2_147_483_647,
    l: -1,
    f: 0,
    d: 1e300,
    s: '',
    raw: Buffer.alloc(0),
    opt: null,
    color: 'RED',
    hash: Buffer.from([0, 0, 0, 1]),
    price: Buffer.from([0xff]), // -1 → -0.01
    day: 0,
    tod: 0,
    tod_us: 0,
    ts_ms: 0,
    ts_us: 0,
    local_us: 0,
    id: '00000000-0000-0000-0000-000000000000',
    tags: [],
    attrs: {},
    point: { x: -0.5, y: 3 },
    either: { x: 9, y: null },
  },
] as const;

/**
 * What each column holds for the two records, in plain JavaScript: numbers, strings,
 * byte arrays as number arrays, timestamps as epoch numbers in their unit, decimals as
 * their text, structs as objects, lists as arrays.
 */
export const EVERYTHING_EXPECTED: Record<string, readonly unknown[]> = {
  b: [true, false],
  i: [-7, 2_147_483_647],
  l: [4_503_599_627_370_496n, -1n],
  f: [1.5, 0],
  d: [-2.25, 1e300],
  s: ['héllo', ''],
  raw: [[0, 1, 2], []],
  opt: ['set', null],
  color: ['GREEN', 'RED'],
  hash: [
    [0xde, 0xad, 0xbe, 0xef],
    [0, 0, 0, 1],
  ],
  price: ['12.50', '-0.01'],
  day: [20_424, 0],
  tod: [45_296_789, 0],
  tod_us: [45_296_789_012n, 0n],
  ts_ms: [1_764_676_800_123n, 0n],
  ts_us: [BigInt(TS_US), 0n],
  local_us: [BigInt(TS_US), 0n],
  id: ['5f0c6c1e-8d2b-4a8e-9f55-2f1f0c3b9a10', '00000000-0000-0000-0000-000000000000'],
  tags: [['a', 'b'], []],
  attrs: [
    [
      { key: 'one', value: 1n },
      { key: 'two', value: 2n },
    ],
    [],
  ],
  point: [
    { x: 1, y: null },
    { x: -0.5, y: 3 },
  ],
  either: [
    { int: 42, string: null, Point: null },
    { int: null, string: null, Point: { x: 9, y: null } },
  ],
};

/** The Arrow type of each column, as Arrow prints it. */
export const EVERYTHING_ARROW_TYPES: Record<string, string> = {
  b: 'Bool',
  i: 'Int32',
  l: 'Int64',
  f: 'Float32',
  d: 'Float64',
  s: 'Utf8',
  raw: 'Binary',
  opt: 'Utf8',
  color: 'Utf8',
  hash: 'Binary',
  price: 'Decimal[10e+2]', // Arrow prints precision 10, scale 2 so
  day: 'Date32<DAY>',
  tod: 'Int32',
  tod_us: 'Int64',
  ts_ms: 'Timestamp<MILLISECOND, UTC>',
  ts_us: 'Timestamp<MICROSECOND, UTC>',
  local_us: 'Timestamp<MICROSECOND>',
  id: 'Utf8',
  tags: 'List<Utf8>',
  attrs: 'List<Struct<{key:Utf8, value:Int64}>>',
  point: 'Struct<{x:Float64, y:Float64}>',
  either: 'Struct<{int:Int32, string:Utf8, Point:Struct<{x:Float64, y:Float64}>}>',
};

/** A Confluent-framed value: magic byte 0, the schema id big-endian, the payload. */
export function framed(schemaId: number, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + payload.byteLength);
  new DataView(out.buffer).setUint32(1, schemaId, false);
  out.set(payload, 5);
  return out;
}

interface ColumnSource {
  readonly numRows: number;
  getChild(name: string): {
    readonly type: { readonly typeId: number; readonly scale?: number };
    readonly data: readonly { readonly length: number; readonly values: ArrayLike<unknown> }[];
    get(i: number): unknown;
  } | null;
}

/**
 * A column's values as EVERYTHING_EXPECTED writes them: timestamps and dates as their
 * stored integers (exact, where Arrow's getters give rounded milliseconds), decimals as
 * text at their scale, bytes as number arrays, structs and lists as plain objects and arrays.
 */
export function plainColumn(source: ColumnSource, name: string): unknown[] {
  const column = source.getChild(name);
  if (!column) throw new Error(`no column ${name}`);
  const typeId = column.type.typeId;
  const raw = (i: number): unknown => {
    let index = i;
    for (const chunk of column.data) {
      if (index < chunk.length) return chunk.values[index];
      index -= chunk.length;
    }
    throw new Error(`row ${i} beyond ${name}`);
  };
  return Array.from({ length: source.numRows }, (_, i) => {
    const v = column.get(i);
    if (v === null || v === undefined) return null;
    // Arrow's type ids: Decimal 7, Date 8, Timestamp 10.
    if (typeId === 10 || typeId === 8) return raw(i);
    if (typeId === 7) return decimalText(decimal128(column.data, i), column.type.scale ?? 0);
    return plain(v);
  });
}

function plain(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (v instanceof Uint8Array) return Array.from(v);
  const json = (v as { toJSON?: () => unknown }).toJSON?.() ?? v;
  if (Array.isArray(json)) return json.map(plain);
  if (json !== null && typeof json === 'object')
    return Object.fromEntries(Object.entries(json).map(([k, x]) => [k, plain(x)]));
  return json;
}

/** A Decimal128 value: four little-endian 32-bit words of a two's-complement integer. */
function decimal128(
  chunks: readonly { readonly length: number; readonly values: ArrayLike<unknown> }[],
  row: number,
): string {
  let index = row;
  for (const chunk of chunks) {
    if (index < chunk.length) {
      let n = 0n;
      for (let w = 3; w >= 0; w--) n = (n << 32n) | BigInt(chunk.values[index * 4 + w] as number);
      return String(n >= 1n << 127n ? n - (1n << 128n) : n);
    }
    index -= chunk.length;
  }
  throw new Error(`row ${row} beyond the column`);
}

function decimalText(unscaled: string, scale: number): string {
  const negative = unscaled.startsWith('-');
  const digits = (negative ? unscaled.slice(1) : unscaled).padStart(scale + 1, '0');
  const text = scale === 0 ? digits : `${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
  return negative ? `-${text}` : text;
}
