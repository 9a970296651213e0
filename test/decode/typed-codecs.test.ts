import { DataType, type Vector } from 'apache-arrow';
import fc from 'fast-check';
import { declaredField, resolveConsumer, type ResolvedConsumer, type SourceRecord } from '../../src/config';
import { fieldSpec } from '../../src/config/field-spec';
import { Invalid } from '../../src/decode/field-codec';
import { codecOf } from '../../src/decode/typed-codecs';
import { RecordDecoder, type RawMessage } from '../../src/decode/record-decoder';
import { schemaKeyOf } from '../../src/staging/schema-key';

/** Declared types at decode time: what each accepts, and the dead letter (with its reason) for what it does not. */

function consumer(fields: Record<string, unknown>): ResolvedConsumer {
  return resolveConsumer(
    { name: 'types', brokers: ['127.0.0.1:1'], topics: ['t'], schema: { fields: fields as never } },
    'test',
  );
}

function messages(texts: readonly string[]): RawMessage[] {
  return texts.map((t, i) => ({
    offsetNumber: i,
    timestampNumber: 1_764_504_000_000,
    key: null,
    value: Buffer.from(t),
  }));
}

/** The dead-letter detail of each record (undefined when it was staged). */
function verdicts(fields: Record<string, unknown>, values: readonly unknown[]): (string | undefined)[] {
  const out = new RecordDecoder(consumer(fields)).decode(
    't',
    0,
    messages(values.map((v) => (typeof v === 'string' && v.startsWith('{') ? v : JSON.stringify({ x: v })))),
  );
  const byOffset = new Map(out.deadLetters.map((d) => [d.offset, d]));
  for (const d of out.deadLetters) {
    expect(d.reason).toBe('schema-mismatch');
    expect(d.field).toBe('x');
  }
  return values.map((_, i) => byOffset.get(i)?.detail);
}

/** The staged values of column x, as plain JavaScript. */
function staged(fields: Record<string, unknown>, texts: readonly string[]): unknown[] {
  const out = new RecordDecoder(consumer(fields)).decode('t', 0, messages(texts));
  expect(out.deadLetters).toEqual([]);
  const column = out.batch!.getChild('x') as Vector;
  const plain = (v: unknown): unknown => {
    if (v === null || typeof v !== 'object') return v;
    const m = v as { toArray?: unknown; type?: unknown; toJSON?: unknown };
    if (typeof m.toArray === 'function' && m.type instanceof DataType) return [...(v as Vector)].map(plain);
    return v;
  };
  return [...column].map(plain);
}

const f32 = (values: number[]) => Buffer.from(new Float32Array(values).buffer).toString('base64');
const f16bits = (bits: number[]) => Buffer.from(new Uint16Array(bits).buffer).toString('base64');

describe('vector', () => {
  const vec3 = { x: { type: 'vector', dim: 3 } };

  test('takes a JSON array of dim numbers or base64 of dim little-endian elements', () => {
    expect(staged(vec3, ['{"x":[1,2.5,-3]}', `{"x":"${f32([0.25, 0, 1e30])}"}`, '{"x":null}'])).toEqual([
      [1, 2.5, -3],
      [0.25, 0, Math.fround(1e30)],
      null,
    ]);
    expect(
      staged({ x: { type: 'vector', dim: 2, element: 'uint8' } }, ['{"x":[0,255]}', '{"x":"AP8="}']),
    ).toEqual([
      [0, 255],
      [0, 255],
    ]);
    expect(
      staged({ x: { type: 'vector', dim: 2, element: 'float16' } }, [
        '{"x":[0.5,-65504]}',
        `{"x":"${f16bits([0x3c00, 0xc000])}"}`,
      ]),
    ).toEqual([
      [0.5, -65504],
      [1, -2],
    ]);
  });

  test('a wrong dimension, a non-number, NaN or ±Infinity is a dead letter naming the field and both dimensions', () => {
    expect(
      verdicts(vec3, [
        [1, 2],
        [1, 2, 3, 4],
        [],
        f32([1, 2]),
        'AAAAAAAAAAAAAAA=', // 11 bytes: not a whole number of float32
        [1, 'a', 3],
        [1, null, 3],
        f32([1, NaN, 3]),
        f32([Infinity, 0, 0]),
        f32([0, 0, -Infinity]),
        [1, 2, 1e39],
        { a: 1 },
      ]),
    ).toEqual([
      'field "x": expected vector<float32>[3]: wrong dimension: expected 3, got 2',
      'field "x": expected vector<float32>[3]: wrong dimension: expected 3, got 4',
      'field "x": expected vector<float32>[3]: wrong dimension: expected 3, got 0',
      'field "x": expected vector<float32>[3]: wrong dimension: expected 3, got 2',
      'field "x": expected vector<float32>[3]: wrong dimension: expected 3, got 11 bytes (2.75 float32)',
      'field "x": expected vector<float32>[3]: element 1 is string, not a number (dimension 3)',
      'field "x": expected vector<float32>[3]: element 1 is null, not a number (dimension 3)',
      'field "x": expected vector<float32>[3]: element 1 is NaN (dimension 3)',
      'field "x": expected vector<float32>[3]: element 0 is Infinity (dimension 3)',
      'field "x": expected vector<float32>[3]: element 2 is -Infinity (dimension 3)',
      'field "x": expected vector<float32>[3]: element 2 (1e+39) is outside float32',
      'field "x": expected vector<float32>[3], got object',
    ]);
    expect(
      verdicts({ x: { type: 'vector', dim: 2, element: 'float16' } }, [f16bits([0x7e00, 0]), [1, 70000]]),
    ).toEqual([
      'field "x": expected vector<float16>[2]: element 0 is NaN (dimension 2)',
      'field "x": expected vector<float16>[2]: element 1 (70000) is outside float16',
    ]);
    expect(
      verdicts({ x: { type: 'vector', dim: 2, element: 'uint8' } }, [
        [1, 256],
        [1, 0.5],
      ]),
    ).toEqual([
      'field "x": expected vector<uint8>[2]: element 1 (256) is not a uint8',
      'field "x": expected vector<uint8>[2]: element 1 (0.5) is not a uint8',
    ]);
  });
});

test('integers are exact and range-checked', () => {
  expect(verdicts({ x: 'int8' }, [-128, 127, 128, 1.5, '1'])).toEqual([
    undefined,
    undefined,
    'field "x": expected int8: 128 is outside int8 (-128 to 127)',
    'field "x": expected int8: 1.5 is not an integer',
    'field "x": expected int8, got string',
  ]);
  expect(verdicts({ x: 'int16' }, [-32769])).toEqual([
    'field "x": expected int16: -32769 is outside int16 (-32768 to 32767)',
  ]);
  expect(verdicts({ x: 'uint8' }, [-1])).toEqual([
    'field "x": expected uint8: -1 is outside uint8 (0 to 255)',
  ]);
  expect(verdicts({ x: 'uint16' }, [65536])).toEqual([
    'field "x": expected uint16: 65536 is outside uint16 (0 to 65535)',
  ]);
  expect(verdicts({ x: 'uint32' }, [4294967296])).toEqual([
    'field "x": expected uint32: 4294967296 is outside uint32 (0 to 4294967295)',
  ]);
  expect(
    verdicts({ x: 'uint64' }, [
      '{"x":18446744073709551615}',
      '{"x":18446744073709551616}',
      -1,
      '{"x":1e19}',
      '1x',
    ]),
  ).toEqual([
    undefined,
    'field "x": expected uint64: 18446744073709551616 is outside uint64',
    'field "x": expected uint64: -1 is outside uint64',
    'field "x": expected uint64: 10000000000000000000 is not an exact integer',
    'field "x": expected uint64, got string',
  ]);
  expect(staged({ x: 'uint64' }, ['{"x":18446744073709551615}', '{"x":"42"}'])).toEqual([
    18446744073709551615n,
    42n,
  ]);
});

test('float32 rounds to the nearest float32 and refuses what is beyond it', () => {
  expect(staged({ x: 'float32' }, ['{"x":0.1}', '{"x":3}'])).toEqual([Math.fround(0.1), 3]);
  expect(verdicts({ x: 'float32' }, [1e39])).toEqual([
    'field "x": expected float32: 1e+39 is outside float32',
  ]);
});

test('binary is standard padded base64; anything else is a dead letter, not skipped', () => {
  expect(staged({ x: 'binary' }, ['{"x":"AAEC/w=="}', '{"x":""}'])).toEqual([
    new Uint8Array([0, 1, 2, 255]),
    new Uint8Array([]),
  ]);
  const malformed =
    'field "x": expected binary: not base64 (standard alphabet, padded to a multiple of 4 characters)';
  expect(verdicts({ x: 'binary' }, ['AQI', 'A===', 'ab$=', 'AQ==AQ==', 'a-_b', 7])).toEqual([
    malformed,
    malformed,
    malformed,
    malformed,
    malformed,
    'field "x": expected binary, got number',
  ]);
  expect(verdicts({ x: 'large_binary' }, ['AQI'])).toEqual([malformed.replace('binary', 'large_binary')]);
});

test('decimal is exact from strings and numbers; overflow and extra digits are dead letters', () => {
  const d = { x: { type: 'decimal', precision: 6, scale: 2 } };
  expect(
    staged(d, [
      '{"x":"1234.5"}',
      '{"x":"-0.01"}',
      '{"x":"1.500"}',
      '{"x":"1.5e2"}',
      '{"x":0.1}',
      '{"x":-9999.99}',
    ]).map(String),
  ).toEqual(['123450', '-1', '150', '15000', '10', '-999999']);
  expect(verdicts(d, ['10000', 10000, '1.234', 'abc', '1e40', ' 1'])).toEqual([
    'field "x": expected decimal(6, 2): 10000 overflows decimal(6, 2) (more than 6 digits)',
    'field "x": expected decimal(6, 2): 10000 overflows decimal(6, 2) (more than 6 digits)',
    'field "x": expected decimal(6, 2): 1.234 has more than 2 fractional digits (decimal(6, 2) would round it)',
    'field "x": expected decimal(6, 2): "abc" is not a decimal number',
    'field "x": expected decimal(6, 2): 1e40 overflows decimal(6, 2) (more than 6 digits)',
    'field "x": expected decimal(6, 2): " 1" is not a decimal number',
  ]);
  // Exponents far out of range are refused without building their power of ten.
  expect(verdicts(d, ['1e-999999', '1e999999', '0e999999'])).toEqual([
    'field "x": expected decimal(6, 2): 1e-999999 has more than 2 fractional digits (decimal(6, 2) would round it)',
    'field "x": expected decimal(6, 2): 1e999999 overflows decimal(6, 2) (more than 6 digits)',
    undefined,
  ]);
  // 38 digits, Decimal128's whole range, exactly.
  const big = '9'.repeat(36) + '.99';
  expect(
    staged({ x: { type: 'decimal', precision: 38, scale: 2 } }, [`{"x":"${big}"}`, `{"x":"-${big}"}`]).map(
      String,
    ),
  ).toEqual(['9'.repeat(38), `-${'9'.repeat(38)}`]);
});

test('date takes YYYY-MM-DD or whole days', () => {
  expect(staged({ x: 'date' }, ['{"x":"1970-01-02"}', '{"x":-1}'])).toEqual([86_400_000, -86_400_000]);
  expect(verdicts({ x: 'date' }, ['2023-02-29', '2024-01-01T00:00', 1.5])).toEqual([
    'field "x": expected date: "2023-02-29" is not a date',
    'field "x": expected date: "2024-01-01T00:00" is not a date (YYYY-MM-DD)',
    'field "x": expected date: not a date (YYYY-MM-DD or days since 1970-01-01)',
  ]);
});

test('a timestamp with a unit keeps its digits down to the unit; numbers are in that unit unless epochUnit says', () => {
  const raw = (fields: Record<string, unknown>, texts: string[]) => {
    const out = new RecordDecoder(consumer(fields)).decode('t', 0, messages(texts));
    expect(out.deadLetters).toEqual([]);
    return [...(out.batch!.getChild('x')!.data[0]!.values as BigInt64Array)];
  };
  expect(
    raw({ x: { type: 'timestamp', unit: 'us' } }, [
      '{"x":"2024-01-01T00:00:00.1234567Z"}',
      '{"x":1704067200123456}',
      '{"x":"1969-12-31T23:59:59.999999Z"}',
    ]),
  ).toEqual([1704067200123456n, 1704067200123456n, -1n]);
  expect(raw({ x: { type: 'timestamp', unit: 'us', epochUnit: 's' } }, ['{"x":1.5}'])).toEqual([1_500_000n]);
  expect(raw({ x: { type: 'timestamp', unit: 'ns' } }, ['{"x":"2024-01-01T00:00:00.000000001Z"}'])).toEqual([
    1704067200000000001n,
  ]);
  expect(raw({ x: { type: 'timestamp', unit: 's' } }, ['{"x":"2024-01-01T00:00:01.999Z"}'])).toEqual([
    1704067201n,
  ]);
  expect(verdicts({ x: { type: 'timestamp', unit: 'ns' } }, ['2300-01-01T00:00:00Z'])).toEqual([
    'field "x": expected timestamp(ns): 2300-01-01T00:00:00Z is outside int64 ns (years 1677–2262 for ns)',
  ]);
});

test('list and struct take nested JSON; a bad nested value names where it is', () => {
  const fields = {
    x: {
      type: 'struct',
      fields: {
        id: { type: 'int32', nullable: false },
        tags: { type: 'list', items: { type: 'string', nullable: false } },
        at: { type: 'list', items: { type: 'struct', fields: { n: 'uint8' } } },
      },
    },
  };
  expect(
    verdicts(fields, [
      { id: 1, tags: ['a'], at: [{ n: 1 }, null, {}] },
      { tags: [] },
      { id: 1, tags: ['a', null] },
      { id: 1, at: [{ n: 300 }] },
      { id: 1, tags: 'a' },
      [1],
    ]),
  ).toEqual([
    undefined,
    'field "x": expected struct<{id: int32, tags: list<string>, at: list<struct<{n: uint8}>>}>: "id": expected int32 (required), got null',
    'field "x": expected struct<{id: int32, tags: list<string>, at: list<struct<{n: uint8}>>}>: "tags": item 1: expected string (required), got null',
    'field "x": expected struct<{id: int32, tags: list<string>, at: list<struct<{n: uint8}>>}>: "at": item 0: "n": 300 is outside uint8 (0 to 255)',
    'field "x": expected struct<{id: int32, tags: list<string>, at: list<struct<{n: uint8}>>}>: "tags": expected list<string>, got string',
    'field "x": expected struct<{id: int32, tags: list<string>, at: list<struct<{n: uint8}>>}>, got array',
  ]);
});

test('inference never invents the declared-only types: arrays and objects stay json', () => {
  const out = new RecordDecoder(
    resolveConsumer({ name: 'i', brokers: ['127.0.0.1:1'], topics: ['t'], schema: 'infer' }, 'test'),
  ).decode('t', 0, messages(['{"v":[1,2,3],"s":{"a":1},"n":1}']));
  expect(
    out.batch!.schema.fields.filter((f) => !f.name.startsWith('_')).map((f) => `${f.name}:${String(f.type)}`),
  ).toEqual(['v:Utf8', 's:Utf8', 'n:Float64']);
});

test("a type's parameters and nested nullability each make a different schema key (parts never mix them)", () => {
  const keyOf = (x: unknown) =>
    schemaKeyOf(new RecordDecoder(consumer({ x })).decode('t', 0, messages(['{}'])).batch!.schema);
  const keys = [
    { type: 'vector', dim: 3 },
    { type: 'vector', dim: 4 },
    { type: 'vector', dim: 4, element: 'float16' },
    'timestamp',
    { type: 'timestamp', unit: 'us' },
    { type: 'timestamp', unit: 'us', timezone: 'UTC' },
    { type: 'decimal', precision: 10, scale: 2 },
    { type: 'decimal', precision: 10, scale: 3 },
    { type: 'list', items: 'int32' },
    { type: 'list', items: { type: 'int32', nullable: false } },
    { type: 'struct', fields: { a: 'int32' } },
    { type: 'struct', fields: { b: 'int32' } },
  ].map(keyOf);
  expect(new Set(keys).size).toBe(keys.length);
  expect(keyOf({ type: 'vector', dim: 3 })).toBe(keys[0]);
});

test('every declared codec converts any value or refuses it with a reason, never throws', () => {
  const declared = [
    ...[
      'float32',
      'int8',
      'int16',
      'uint8',
      'uint16',
      'uint32',
      'uint64',
      'date',
      'binary',
      'large_string',
      'large_binary',
    ].map((type) => ({ type })),
    { type: 'timestamp', unit: 'us', timezone: 'UTC' },
    { type: 'timestamp', unit: 'ns' },
    { type: 'vector', dim: 2 },
    { type: 'vector', dim: 2, element: 'float16' },
    { type: 'vector', dim: 2, element: 'uint8' },
    { type: 'decimal', precision: 5, scale: 2 },
    { type: 'list', items: { type: 'list', items: 'int8' } },
    { type: 'struct', fields: { a: 'uint8', b: { type: 'list', items: 'date' } } },
  ];
  const codecs = declared.map((d) => codecOf(declaredField(fieldSpec.parse(d)), 'ms'));
  fc.assert(
    fc.property(
      fc.anything({ withBigInt: true, withNullPrototype: true, withTypedArray: true }),
      fc.nat(codecs.length - 1),
      (value, i) => {
        const out = codecs[i]!.convert(value, 'ms');
        if (out instanceof Invalid) return;
        const builder = codecs[i]!.builder();
        codecs[i]!.append(builder, out);
        expect(builder.finish().length).toBe(1);
      },
    ),
    { numRuns: 3_000, seed: 19 },
  );
});

test('format raw with a transform: a declared binary field takes the bytes as they are, a vector a Float32Array', () => {
  const c = resolveConsumer(
    {
      name: 'raw',
      brokers: ['127.0.0.1:1'],
      topics: ['t'],
      format: 'raw',
      transform: (r: SourceRecord) => {
        const bytes = r.value as Buffer;
        return { payload: bytes, emb: new Float32Array([bytes.length, 0.5]) };
      },
      schema: { fields: { payload: 'binary', emb: { type: 'vector', dim: 2 } } },
    },
    'test',
  );
  const out = new RecordDecoder(c).decode('t', 0, [
    { offsetNumber: 0, timestampNumber: 1_764_504_000_000, key: null, value: new Uint8Array([0, 255, 7]) },
  ]);
  expect(out.deadLetters).toEqual([]);
  expect(out.batch!.getChild('payload')!.get(0)).toEqual(new Uint8Array([0, 255, 7]));
  expect([...(out.batch!.getChild('emb')!.get(0) as Vector)]).toEqual([3, 0.5]);
  expect(() =>
    resolveConsumer(
      { name: 'raw', brokers: ['b:1'], topics: ['t'], format: 'raw', schema: { fields: { a: 'binary' } } },
      'test',
    ),
  ).toThrow('format "raw" without a transform has a fixed schema');
});
