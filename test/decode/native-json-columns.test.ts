/**
 * The native JSON decoder (native/json-columns) against the TypeScript decoder, its
 * reference: on the same batches both must give the same rows (every column, every
 * system column), the same dead letters with the same reasons, and the same minutes.
 * Whatever the native decoder does not read exactly as the reference, it must leave to it.
 */
import fc from 'fast-check';
import type { RecordBatch } from 'apache-arrow';
import { resolveConsumer } from '../../src/config';
import { NativeJsonColumns, nativeJsonModule } from '../../src/decode/native-json-columns';
import { RecordDecoder, type DecoderOptions, type RawMessage } from '../../src/decode/record-decoder';
import { declaredField } from '../../src/decode/field-state';
import { packMessages, unpackMessages } from '../../src/pool/packed-messages';

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);

const FIELDS = {
  s: 'string',
  i: 'int32',
  l: 'int64',
  f: 'float64',
  b: 'boolean',
  t: 'timestamp',
  j: 'json',
  req: { type: 'string', nullable: false },
  secs: { type: 'timestamp', epochUnit: 's' },
} as const;

function options(extra: Record<string, unknown> = {}): DecoderOptions {
  return resolveConsumer(
    { name: 'n', brokers: ['127.0.0.1:1'], topics: ['t'], schema: { fields: FIELDS }, ...extra },
    'n',
  );
}

/** Values as the staging worker sees them: views into one packed buffer. */
function batch(values: readonly (string | Uint8Array | null)[], timestamp = NOW): RawMessage[] {
  return unpackMessages(
    packMessages(
      values.map((v, i) => ({
        offset: String(100 + i),
        timestamp: String(timestamp),
        key: null,
        value: v === null ? null : typeof v === 'string' ? Buffer.from(v) : Buffer.from(v),
      })),
    ),
  );
}

function rowsOf(b: RecordBatch | undefined): string[] {
  return (b?.toArray() ?? []).map((r) =>
    JSON.stringify(r.toJSON(), (_k, v: unknown) =>
      typeof v === 'bigint' ? `${v}n` : typeof v === 'number' && Object.is(v, -0) ? '-0' : v,
    ),
  );
}

/** Rows the native decoder read itself (not left to the reference), over the whole file. */
let nativeRows = 0;
let records = 0;

function both(messages: RawMessage[], extra: Record<string, unknown> = {}) {
  const resolved = options(extra);
  const own = NativeJsonColumns.for(
    resolved.fields!.map((f) => declaredField(f, resolved.epochUnit)),
    resolved.eventTimeField,
  )!;
  nativeRows += own.decode(messages.filter((m) => m.value !== null)).rows;
  records += messages.length;
  const native = new RecordDecoder(options(extra), () => NOW, 'native');
  const reference = new RecordDecoder(options(extra), () => NOW, 'typescript');
  expect(native.native).toBe(true);
  const a = native.decode('t', 3, messages, 'topic-id');
  const b = reference.decode('t', 3, messages, 'topic-id');
  return {
    native: { rows: rowsOf(a.batch), deadLetters: a.deadLetters, minute: a.minute, count: a.rows },
    reference: { rows: rowsOf(b.batch), deadLetters: b.deadLetters, minute: b.minute, count: b.rows },
  };
}

const built = nativeJsonModule() !== undefined;
if (!built && process.env.KAFKA_LANCE_NATIVE_JSON !== 'off')
  throw new Error('native/json-columns is not built: `npm run build` builds it (cargo is needed)');
const describeBuilt = built ? describe : describe.skip;

describeBuilt('the native JSON decoder', () => {
  const EDGES = [
    '{"s":"plain","i":1,"l":2,"f":1.5,"b":true,"t":"2026-11-30T12:00:00.123Z","j":{"a":[1,"x",null]},"req":"r","secs":1764504000}',
    ' { "req" : "spaces" , "s" : "a\\"b\\\\c\\/d\\n\\u00e9\\ud83d\\ude00" } ',
    '{"req":"x","s":"\\ud800"}', // lone surrogate: a dead letter
    '{"req":"x","ignored":"\\ud800"}', // lone surrogate in a key nobody reads: a row
    '{"req":"x","i":2147483648}',
    '{"req":"x","i":-2147483648,"l":"-9223372036854775808"}',
    '{"req":"x","l":9223372036854775808}',
    '{"req":"x","l":12345678901234567}',
    '{"req":"x","l":1.0,"i":7.000}',
    '{"req":"x","l":1.5}',
    '{"req":"x","l":1e3}',
    '{"req":"x","f":12345678901234567}',
    '{"req":"x","f":67482704808384810}',
    '{"req":"x","f":-0,"i":-0}',
    '{"req":"x","f":1e400}',
    '{"req":"x","f":"1.5"}',
    '{"req":"x","t":"2026-02-29T00:00:00.000Z"}',
    '{"req":"x","t":"2024-02-29t23:59:59.999z"}',
    '{"req":"x","t":"2026-11-30T12:00:00Z"}',
    '{"req":"x","t":"2026-11-30T13:00:00.000+01:00"}',
    '{"req":"x","t":1764504000123,"secs":-1.5}',
    '{"req":"x","t":253402300800000}',
    '{"req":"x","secs":1764504000.123456}',
    '{"req":"x","j":{"b":1, "a" :[ true , false ] }}',
    '{"req":"x","j":{"1":1,"b":2}}',
    '{"req":"x","j":{"a":1,"a":2}}',
    '{"req":"x","j":[1.50,-0,-0.0,100.0,0.000001,-0.00000123,123456789012345678901234]}',
    '{"req":"x","j":0.0000001}',
    '{"req":"x","j":-0.00000012}',
    '{"req":"x","j":1e5}',
    '{"req":"x","j":123456789012345.5}',
    '{"req":"x","j":1234567890123456.0}',
    '{"req":"x","j":0.1234567890123456}',
    '{"req":"x","j":100000000000000000000000.5}',
    '{"req":"x","t":"2026-11-30T24:00:00.000Z"}',
    '{"req":"x","t":"2026-11-30T23:60:00.000Z"}',
    '{"req":"x","t":"2026-11-30T23:59:60.000Z"}',
    '{"req":"x","t":"2026-02-29T00:00:00.000Z"}',
    '{"req":"x","t":"1900-02-29T00:00:00.000Z"}',
    '{"req":"x","t":"2000-02-29T00:00:00.000Z"}',
    '{"req":"x","t":"2026-04-31T00:00:00.000Z"}',
    '{"req":"x","t":"2026-00-10T00:00:00.000Z"}',
    '{"req":"x","t":"0000-01-01T00:00:00.000Z"}',
    '{"req":"x","t":"9999-12-31T23:59:59.999Z"}',
    '{"req":"x","t":"1969-12-31T23:59:59.999Z"}',
    '{"req":"x","t":"2026-11-30T12:00:00.12Z"}',
    '{"req":"x","t":-62167219200001}',
    '{"req":"x","t":-62167219200000}',
    '{"req":"x","secs":253402300799.999}',
    '{"req":"x","secs":253402300800}',
    '{"req":"x","secs":-0.0005}',
    '{"req":"x","j":"\\u0001\\u001f\\b\\f\\n\\r\\t\\"\\\\\\/é\\u2028"}',
    '{"req":"x","j":1234567890123456.5}',
    '{"req":"x","j":null,"s":null}',
    '{"req":null}',
    '{"s":"no req"}',
    '{"req":"x","req":"twice"}',
    '{"req":"x","constructor":1}',
    '[1,2]',
    '"a string"',
    '{"req":"x"',
    '{"req":"x"} trailing',
    '{"req":"x",}',
    '{"req":"x","n":01}',
    '{"req":"x","n":1.}',
    '{"req":"x","n":.5}',
    '{"req":"x","n":"tab\there"}',
    '\uFEFF{"req":"bom"}',
    '',
    null,
  ];

  test('gives the rows, dead letters and minutes the TypeScript decoder gives, record by record', () => {
    for (const value of EDGES) {
      const { native, reference } = both(batch([value, '{"req":"neighbour"}']));
      expect({ value, ...native }).toEqual({ value, ...reference });
    }
  });

  test('gives them for a whole batch, with invalid UTF-8, too-large and tombstone records among plain ones', () => {
    const values = [
      ...EDGES,
      new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x7d]),
      `{"req":"${'x'.repeat(2000)}"}`,
    ];
    const { native, reference } = both(batch(values), { maxRecordBytes: 1000, tombstones: 'dead-letter' });
    expect(native).toEqual(reference);
    expect(native.deadLetters.map((d) => d.reason)).toEqual(
      expect.arrayContaining(['invalid-utf8', 'too-large', 'tombstone', 'invalid-json', 'schema-mismatch']),
    );
  });

  test('keys the minutes by the event-time field when there is one', () => {
    const values = EDGES.filter((v) => v !== null);
    const { native, reference } = both(batch(values), { eventTimeField: 't' });
    expect(native).toEqual(reference);
    expect(Array.isArray(native.minute) && native.minute.length).toBe(native.count);
  });

  test('a wild Kafka timestamp is the reference decoder dead letter', () => {
    const { native, reference } = both(batch(['{"req":"x"}'], 8.64e15 + 1));
    expect(native).toEqual(reference);
    expect(native.deadLetters[0]?.reason).toBe('invalid-event-time');
  });

  test('reads plain records itself and leaves only the forms it does not read exactly', () => {
    const resolved = options();
    const native = NativeJsonColumns.for(
      resolved.fields!.map((f) => declaredField(f, resolved.epochUnit)),
      undefined,
    )!;
    const decoded = native.decode(batch([EDGES[0]!, EDGES[1]!, EDGES[2]!, EDGES[19]!, EDGES[24]!]));
    // The plain record and the escaped one are its own; the lone surrogate, the offset
    // timestamp and the integer-like key are the reference's.
    expect(decoded.rejected).toEqual([2, 3, 4]);
    expect(decoded.rows).toBe(2);
  });

  test('is not used where it cannot take every field', () => {
    const vector = resolveConsumer(
      {
        name: 'n',
        brokers: ['127.0.0.1:1'],
        topics: ['t'],
        schema: { fields: { v: { type: 'vector', dim: 2, element: 'float16' } } },
      },
      'n',
    );
    expect(new RecordDecoder(vector, () => NOW).native).toBe(false);
    expect(new RecordDecoder({ ...options(), fields: undefined }, () => NOW).native).toBe(false);
    expect(new RecordDecoder(options({ eventTimeField: 's' }), () => NOW).native).toBe(false);
    const inherited = resolveConsumer(
      { name: 'n', brokers: ['127.0.0.1:1'], topics: ['t'], schema: { fields: { toString: 'string' } } },
      'n',
    );
    expect(new RecordDecoder(inherited, () => NOW).native).toBe(false);
  });

  /** JSON text for a value, in one of the ways a producer might write it. */
  const whitespace = fc.constantFrom('', ' ', '\n', '\t ', '\r\n');
  const numberText = fc.oneof(
    fc.integer().map(String),
    fc.bigInt({ min: -(10n ** 24n), max: 10n ** 24n }).map(String),
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
    fc.constantFrom('-0', '1.0', '1.50', '100.0', '0.000001', '1e5', '1E-3', '2.5e+2', '9007199254740993'),
    // Decimal literals as people write them: leading zeros after the point, trailing zeros.
    fc
      .tuple(fc.boolean(), fc.stringMatching(/^(0|[1-9][0-9]{0,17})$/), fc.stringMatching(/^[0-9]{1,18}$/))
      .map(([negative, int, fraction]) => `${negative ? '-' : ''}${int}.${fraction}`),
  );
  const escaped = (s: string) =>
    [...s]
      .map((c) =>
        c === '"' || c === '\\'
          ? `\\${c}`
          : c.charCodeAt(0) < 0x20 || c.charCodeAt(0) % 5 === 0
            ? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`
            : c,
      )
      .join('');
  const stringText = fc.oneof(
    fc.string({ unit: 'grapheme' }).map((s) => JSON.stringify(s)),
    fc.string({ unit: 'binary' }).map((s) => `"${escaped(s)}"`),
    fc
      .date({ min: new Date(-62_000_000_000_000), max: new Date(250_000_000_000_000), noInvalidDate: true })
      .map((d) => JSON.stringify(d.toISOString())),
    fc.constantFrom(
      '"2026-11-30T12:00:00Z"',
      '"2026-13-01T00:00:00.000Z"',
      '"123"',
      '"-9223372036854775809"',
    ),
    // The canonical shape with any digits: months, days, hours out of range among them.
    fc
      .tuple(...[4, 2, 2, 2, 2, 2, 3].map((n) => fc.stringMatching(new RegExp(`^[0-9]{${n}}$`))))
      .map(([y, mo, d, h, mi, sec, ms]) => `"${y}-${mo}-${d}T${h}:${mi}:${sec}.${ms}Z"`),
  );
  const valueText: fc.Arbitrary<string> = fc.letrec<{ value: string }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      numberText,
      stringText,
      fc.constantFrom('true', 'false', 'null'),
      fc
        .array(fc.tuple(whitespace, tie('value')), { maxLength: 4 })
        .map((items) => `[${items.map(([w, v]) => w + v).join(',')}]`),
      fc
        .array(fc.tuple(fc.constantFrom('a', 'b', '1', 'é', 'a b', '__proto__'), whitespace, tie('value')), {
          maxLength: 4,
        })
        .map((entries) => `{${entries.map(([k, w, v]) => `${JSON.stringify(k)}:${w}${v}`).join(',')}}`),
    ),
  })).value;
  const integerText = fc.oneof(
    { weight: 4, arbitrary: fc.integer().map(String) },
    fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n }).map(String),
    fc.constantFrom('-0', '7.0', '1e3', '"42"', '"-9223372036854775808"'),
  );
  const isoDate = fc
    .date({ min: new Date(-62_000_000_000_000), max: new Date(250_000_000_000_000), noInvalidDate: true })
    .map((d) => JSON.stringify(d.toISOString()));
  const timestampText = fc.oneof(
    { weight: 4, arbitrary: isoDate },
    { weight: 2, arbitrary: fc.integer({ min: -1e9, max: 1e9 }).map((n) => String(n * 1000)) },
    stringText,
    fc.bigInt({ min: -(10n ** 20n), max: 10n ** 20n }).map(String),
    numberText,
  );
  /** Mostly the field's own kind (so the native decoder reads most records), sometimes anything. */
  const TYPED: Record<string, fc.Arbitrary<string>> = {
    s: stringText,
    req: stringText,
    i: integerText,
    l: integerText,
    f: numberText,
    b: fc.constantFrom('true', 'false'),
    t: timestampText,
    secs: timestampText,
    j: valueText,
  };
  const entry = fc
    .constantFrom(...Object.keys(FIELDS), 'other', 'constructor')
    .chain((key) =>
      fc.tuple(
        fc.constant(key),
        whitespace,
        fc.oneof(
          { weight: 12, arbitrary: Object.hasOwn(TYPED, key) ? TYPED[key]! : valueText },
          { weight: 1, arbitrary: valueText },
        ),
      ),
    );
  const recordText = fc
    .tuple(stringText, fc.uniqueArray(entry, { maxLength: 7, selector: ([k]) => k }), fc.nat(20))
    .map(([req, entries, repeat]) => {
      // A repeated key now and then: JSON.parse keeps its last value.
      const all = [['req', '', req] as const, ...entries];
      if (repeat === 0 && entries.length > 0) all.push(entries[0]!);
      return `{${all.map(([k, w, v]) => `${w}"${k}"${w}:${v}`).join(',')}}`;
    });
  const mutated = fc.tuple(recordText, fc.nat(), fc.integer({ min: 0, max: 255 })).map(([text, at, byte]) => {
    const bytes = Buffer.from(text);
    if (bytes.length > 0) bytes[at % bytes.length] = byte;
    return new Uint8Array(bytes);
  });

  test('gives the reference rows and dead letters for generated records, whitespace, escapes and mutations', () => {
    const [rowsBefore, recordsBefore] = [nativeRows, records];
    fc.assert(
      fc.property(
        fc.array(fc.oneof({ weight: 4, arbitrary: recordText }, { weight: 1, arbitrary: mutated }), {
          minLength: 1,
          maxLength: 20,
        }),
        fc.boolean(),
        (values, eventTime) => {
          const { native, reference } = both(batch(values), eventTime ? { eventTimeField: 't' } : {});
          expect(native).toEqual(reference);
        },
      ),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 400), seed: Number(process.env.FUZZ_SEED ?? 2026) },
    );
    // The property says something only if the native decoder read many records itself.
    expect((nativeRows - rowsBefore) / (records - recordsBefore)).toBeGreaterThan(0.15);
  });

  describe('float32 vectors', () => {
    // dim 4: 16 bytes, whose base64 ends in "==" (the leftover-bits rule applies).
    const VECTORS = {
      id: { type: 'int64', nullable: false },
      v: { type: 'vector', dim: 4 },
      w: { type: 'vector', dim: 3, nullable: false },
    } as const;
    const vectors = { schema: { fields: VECTORS } };
    const b64 = (xs: readonly number[]) => Buffer.from(new Float32Array(xs).buffer).toString('base64');
    const W = b64([1, 2, 3]);
    const EDGE_VECTORS = [
      `{"id":1,"v":"${b64([0.1, -0, 3.5, -2e-40])}","w":"${W}"}`,
      `{"id":2,"v":[0.1, -0, 3.4028234663852886e38, 1e-50],"w":[1,2,3]}`,
      `{"id":3,"v":[ 1 , 2 , 3 , 4 ] ,"w":"${W}"}`,
      `{"id":4,"v":null,"w":"${W}"}`,
      `{"id":5,"w":"${W}"}`,
      `{"id":6,"v":[1,2,3],"w":"${W}"}`, // wrong dimension
      `{"id":7,"v":[1,2,3,4,5],"w":"${W}"}`,
      `{"id":8,"v":[],"w":"${W}"}`,
      `{"id":9,"v":[1,2,null,4],"w":"${W}"}`,
      `{"id":10,"v":[1,2,"3",4],"w":"${W}"}`,
      `{"id":11,"v":[1,2,[3],4],"w":"${W}"}`,
      `{"id":12,"v":[1,2,3,1e400],"w":"${W}"}`,
      `{"id":13,"v":[1,2,3,3.4028235677973366e38],"w":"${W}"}`, // rounds to float32 infinity
      `{"id":14,"v":[1,2,3,3.4028235677973362e38],"w":"${W}"}`, // rounds down to float32's max
      `{"id":15,"v":[1,2,3,4,],"w":"${W}"}`,
      `{"id":16,"v":"${b64([1, 2, 3, NaN])}","w":"${W}"}`,
      `{"id":17,"v":"${b64([1, 2, 3, -Infinity])}","w":"${W}"}`,
      `{"id":18,"v":"${b64([1, 2, 3])}","w":"${W}"}`, // 12 bytes: wrong dimension
      `{"id":19,"v":"${b64([1, 2, 3, 4]).replace(/==$/, '')}","w":"${W}"}`, // unpadded
      `{"id":20,"v":"${b64([1, 2, 3, 4]).replace(/.==$/, 'B==')}","w":"${W}"}`, // leftover bits set
      `{"id":21,"v":"${b64([1, 2, 3, 4]).replace('A', '-')}","w":"${W}"}`, // not the standard alphabet
      `{"id":22,"v":"${b64([1, 2, 3, 4]).replace(/\//g, '\\/')}","w":"${W}"}`, // escaped solidus
      `{"id":23,"v":"${b64([1, 2, 3, 4]).slice(0, 8)}\\u0041${b64([1, 2, 3, 4]).slice(9)}","w":"${W}"}`,
      `{"id":24,"v":"${b64([1, 2, 3, 4])}"}`, // required w absent
      `{"id":25,"v":"${b64([1, 2, 3, 4])}","w":null}`,
      `{"id":26,"v":{"0":1},"w":"${W}"}`,
      `{"id":27,"v":"","w":"${W}"}`,
      `{"id":28,"v":[1.00000005960464477539062,16777217,-1.401298464324817e-45,7e-46],"w":[1,2,3]}`,
    ];

    test('gives the reference rows and dead letters for base64 and JSON arrays, record by record', () => {
      for (const value of EDGE_VECTORS) {
        const { native, reference } = both(batch([value, `{"id":0,"w":"${W}"}`]), vectors);
        expect({ value, ...native }).toEqual({ value, ...reference });
      }
    });

    test('reads well-formed vectors itself, straight into the column, and leaves the rest', () => {
      const resolved = options(vectors);
      const own = NativeJsonColumns.for(
        resolved.fields!.map((f) => declaredField(f, resolved.epochUnit)),
        undefined,
      )!;
      const decoded = own.decode(batch(EDGE_VECTORS));
      // Its own: plain, null and absent vectors, float32's max, escapes in the base64, the
      // leftover bits Buffer.from ignores, subnormals; the rest are the reference's.
      expect(decoded.rejected).toEqual([5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16, 17, 18, 20, 23, 24, 25, 26]);
      expect(decoded.rows).toBe(10);
      // The rows a consumer of the batch sees: the base64 bytes and the rounded numbers.
      const v = decoded.children[1]!;
      expect(v.length).toBe(10);
      expect(Array.from(v.children[0]!.values as Float32Array).slice(0, 8)).toEqual([
        Math.fround(0.1),
        -0,
        3.5,
        Math.fround(-2e-40),
        Math.fround(0.1),
        -0,
        Math.fround(3.4028234663852886e38),
        0,
      ]);
    });

    const float32 = fc.float({ noDefaultInfinity: true, noNaN: true });
    const element = fc.oneof(
      { weight: 1, arbitrary: fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n }).map(String) },
      { weight: 30, arbitrary: float32.map((x) => JSON.stringify(x)) },
      {
        weight: 10,
        arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }).map((x) => JSON.stringify(x)),
      },
      { weight: 1, arbitrary: numberText },
      { weight: 1, arbitrary: fc.constantFrom('null', '"1"', '[]', '1e39', '-3.5e38', '1e-46') },
    );
    /** Mostly `dim` elements (so the native decoder reads most records), sometimes one more or less. */
    const vectorText = (dim: number) => {
      const length = fc.oneof(
        { weight: 8, arbitrary: fc.constant(dim) },
        fc.constant(dim - 1),
        fc.constant(dim + 1),
      );
      return fc.oneof(
        length.chain((n) =>
          fc
            .array(fc.tuple(whitespace, element), { minLength: n, maxLength: n })
            .map((items) => `[${items.map(([w, x]) => w + x).join(',')}]`),
        ),
        length.chain((n) =>
          fc.array(float32, { minLength: n, maxLength: n }).map((xs) => JSON.stringify(b64(xs))),
        ),
        fc
          .array(fc.integer({ min: 0, max: 255 }), { minLength: 4 * dim - 1, maxLength: 4 * dim + 1 })
          .map((bytes) => JSON.stringify(Buffer.from(bytes).toString('base64'))),
      );
    };
    const vectorRecord = fc
      .tuple(fc.nat(), vectorText(4), vectorText(3))
      .map(([id, v, w]) => `{"id":${id},"v":${v},"w":${w}}`);

    test('gives the reference rows and dead letters for generated vectors', () => {
      const [rowsBefore, recordsBefore] = [nativeRows, records];
      fc.assert(
        fc.property(fc.array(vectorRecord, { minLength: 1, maxLength: 20 }), (values) => {
          const { native, reference } = both(batch(values), vectors);
          expect(native).toEqual(reference);
        }),
        { numRuns: Number(process.env.FUZZ_RUNS ?? 300), seed: Number(process.env.FUZZ_SEED ?? 2026) },
      );
      expect((nativeRows - rowsBefore) / (records - recordsBefore)).toBeGreaterThan(0.15);
    });
  });
});
