/**
 * The native readers of the registry formats (native/json-columns/src/avro.rs, protobuf.rs)
 * against the compiled readers they mirror (src/decode/avro/ and protobuf/compiled-reader.ts):
 * over generated writer schemas and values — edge values, invalid UTF-8, out-of-range indexes,
 * fields repeated and unknown, flipped, cut and padded bytes — each must take exactly the
 * records its compiled reader takes and write the same values. Then the record decoder's use of
 * them: whole batches of one admitted writer, the same rows and dead letters as the reference
 * decoder.
 */
import * as avro from 'avsc';
import {
  Field,
  RecordBatch,
  Schema as ArrowSchema,
  Struct,
  makeData,
  makeVector,
  type Data,
} from 'apache-arrow';
import fc from 'fast-check';
import { AVRO_PAYLOADS } from '../../src/decode/avro/writer-schemas';
import { PROTOBUF_PAYLOADS } from '../../src/decode/protobuf/protobuf-payloads';
import type { CompiledReader } from '../../src/decode/compiled-reader';
import { NativeRegistryColumns } from '../../src/decode/native-registry-columns';
import { nativeJsonModule } from '../../src/decode/native-json-columns';
import type { RawMessage } from '../../src/decode/raw-message';
import { codecOf } from '../../src/decode/typed-codecs';
import { LOG_V1, LOG_V2 } from '../../src/cli/avro-log-records';
import { Random, datum, framed, recordOf, varint } from './avro-datums';
import { decodeBoth, rowsOf } from './compiled-vs-reference';
import { msg } from './fixture';
import * as protobuf from 'protobufjs';
import { protobufFramed } from '../support/protobuf-fixtures';
import {
  MUTATIONS,
  compiledOf as protobufCompiledOf,
  mutatedMessage,
  protoOf,
  typeOf,
} from './protobuf-messages';
import { BODIES, P2, P3 } from './protobuf-edge-bodies';

const built =
  nativeJsonModule()?.AvroColumns !== undefined && nativeJsonModule()?.ProtobufColumns !== undefined;
// Without cargo the module is not built and every record takes the compiled reader (CI requires it).
const maybe = built ? describe : describe.skip;

function compiledOf(schema: unknown): CompiledReader | undefined {
  try {
    return AVRO_PAYLOADS.parse(JSON.stringify(schema), []).compiled?.reader;
  } catch {
    return undefined;
  }
}

/** The native reader of a compiled reader's program into its columns (its fields' codecs' types). */
function nativeOf(reader: CompiledReader) {
  const types = reader.fields.map(({ field }) => codecOf(field, 'ms').arrowType());
  return NativeRegistryColumns.for(reader.native!, types);
}

function batchOf(reader: CompiledReader, children: readonly Data[], rows: number): RecordBatch {
  const fields = reader.fields.map(
    ({ name, field }) => new Field(name, codecOf(field, 'ms').arrowType(), true),
  );
  return new RecordBatch(
    new ArrowSchema(fields),
    makeData({ type: new Struct(fields), length: rows, nullCount: 0, children: [...children] }),
  );
}

/** The compiled reader's verdicts and rows for `messages`, one record at a time. */
function compiledRead(reader: CompiledReader, messages: readonly RawMessage[]) {
  const builders = reader.fields.map(({ field }) => codecOf(field, 'ms').builder());
  const rejected: number[] = [];
  messages.forEach((m, i) => {
    const value = m.value!;
    const buf = Buffer.from(value.buffer);
    const start = value.byteOffset;
    if (reader.check(buf, start, start + value.byteLength))
      reader.append(buf, start, start + value.byteLength, builders);
    else rejected.push(i);
  });
  const rows = messages.length - rejected.length;
  return {
    rejected,
    rows: rowsOf(
      batchOf(
        reader,
        builders.map((b) => b.finish()),
        rows,
      ),
    ),
  };
}

/** The native reader's verdicts and rows for `messages`, beside the compiled reader's. */
function bothRead(reader: CompiledReader, messages: readonly RawMessage[]) {
  const decoded = nativeOf(reader)!.decode(messages);
  return {
    native: {
      rejected: [...decoded.rejected],
      rows: rowsOf(batchOf(reader, decoded.children, decoded.rows)),
    },
    compiled: compiledRead(reader, messages),
    taken: decoded.rows,
  };
}

let nativeSchemas = 0;
let schemas = 0;
let taken = 0;
let records = 0;

maybe('the native Avro reader', () => {
  test('takes exactly the records the compiled reader takes and writes the same values, over generated schemas and datums', () => {
    fc.assert(
      fc.property(
        fc.integer(),
        fc.boolean(),
        fc.array(fc.tuple(fc.nat(), fc.constantFrom('keep', 'keep', 'keep', 'flip', 'cut', 'pad')), {
          minLength: 1,
          maxLength: 40,
        }),
        (seed, oneBuffer, plan) => {
          const r = new Random(seed);
          const schema = recordOf(r, 0);
          const reader = compiledOf(schema);
          schemas += 1;
          if (!reader?.native) return;
          nativeSchemas += 1;
          const values = plan.map(([n, mutation]) => {
            const bytes: number[] = [];
            datum(r, schema, bytes);
            if (mutation === 'flip' && bytes.length > 0) bytes[n % bytes.length] = r.int(256);
            if (mutation === 'cut' && bytes.length > 0) bytes.length = n % bytes.length;
            if (mutation === 'pad') bytes.push(r.int(256));
            return framed(1, bytes);
          });
          // A staging worker's values are views into one buffer; others are copied together.
          let views = values;
          if (oneBuffer) {
            const whole = Buffer.concat([Buffer.from([7]), ...values]);
            let at = 1;
            views = values.map((v) => {
              const view = whole.subarray(at, at + v.byteLength);
              at += v.byteLength;
              return view;
            });
          }
          const messages = views.map((v, offset) => msg(offset, v));
          const { native, compiled, taken: rows } = bothRead(reader, messages);
          expect(native).toEqual(compiled);
          records += messages.length;
          taken += rows;
        },
      ),
      { numRuns: 400, seed: 20261207 },
    );
    // Worth something only if many schemas had a native reading and many records were read there.
    expect(nativeSchemas / schemas).toBeGreaterThan(0.2);
    expect(taken / records).toBeGreaterThan(0.1);
  });

  test('takes no more room for a batch of many small records than their bytes, after a batch of one large record', () => {
    // The room is the last batch's bytes per row: 1 MB a row, then 50,000 rows, would ask for
    // 56 GB, an allocation Rust cannot make and aborts the process on.
    const schema = { type: 'record', name: 'Line', fields: [{ name: 'text', type: 'string' }] };
    const reader = compiledOf(schema)!;
    const native = nativeOf(reader)!;
    const line = (text: string) => {
      const bytes: number[] = [];
      varint(bytes, BigInt(Buffer.byteLength(text)));
      return framed(1, [...bytes, ...Buffer.from(text)]);
    };
    expect(native.decode([msg(0, line('x'.repeat(1_000_000)))]).rows).toBe(1);
    const small = Array.from({ length: 50_000 }, (_, i) => msg(1 + i, line(`line ${i}`)));
    const decoded = native.decode(small);
    expect(decoded.rows).toBe(50_000);
    expect(makeVector(decoded.children[0]!).get(49_999)).toBe('line 49999');
  });

  test('declines a column whose type is not the one its op writes', () => {
    const reader = compiledOf(LOG_V1)!;
    const types = reader.fields.map(({ field }) => codecOf(field, 'ms').arrowType());
    expect(NativeRegistryColumns.for(reader.native!, types)).toBeDefined();
    // `level` (a string) given an int column: the decoder keeps the compiled reader.
    expect(
      NativeRegistryColumns.for(reader.native!, [types[0]!, types[5]!, ...types.slice(2)]),
    ).toBeUndefined();
    expect(NativeRegistryColumns.for(reader.native!, types.slice(1))).toBeUndefined();
  });
});

maybe('the record decoder with the native Avro reader', () => {
  const v1 = avro.Type.forSchema(LOG_V1 as avro.Schema);
  const v2 = avro.Type.forSchema(LOG_V2 as avro.Schema);
  const log = (i: number) => ({
    ts: 1_764_676_800_000 + i,
    level: i % 7 === 0 ? 'ERROR' : 'INFO',
    service: `svc-${i % 5}`,
    host: 'h-1',
    message: `request ${i} done ✓`,
    status: 200 + (i % 3),
    latency_ms: i / 3,
    trace_id: `t${i}`,
    attrs: { region: 'eu', attempt: i % 4, seq: i * 2 ** 40 },
  });
  const value = (type: avro.Type, id: number, record: object) =>
    Uint8Array.from([0, 0, 0, 0, id, ...type.toBuffer(record)]);
  const writers = [
    { id: 1, schemaType: 'AVRO', schema: JSON.stringify(LOG_V1) },
    { id: 2, schemaType: 'AVRO', schema: JSON.stringify(LOG_V2) },
  ];

  afterEach(() => jest.restoreAllMocks());

  test('reads a batch of one admitted writer whole, with the rows and dead letters of the reference', () => {
    const decode = jest.spyOn(NativeRegistryColumns.prototype, 'decode');
    const first = Array.from({ length: 5 }, (_, i) => msg(i, value(v1, 1, log(i))));
    const corrupt = value(v1, 1, log(99)).slice(0, 20);
    const second = [
      ...Array.from({ length: 50 }, (_, i) => msg(5 + i, value(v1, 1, log(5 + i)))),
      msg(55, null), // a tombstone: a dead letter here
      msg(56, corrupt), // cut short: the reference's dead letter
      msg(57, value(v1, 1, log(57))),
    ];
    const { compiled, reference } = decodeBoth('avro', [first, second], writers);
    expect(compiled).toEqual(reference);
    expect(compiled![1]!.rows).toHaveLength(51);
    expect(compiled![1]!.deadLetters.map((d) => d.reason)).toEqual(['tombstone', 'undecodable-payload']);
    // The first batch admits the writer (one record at a time); the second is read natively.
    expect(decode).toHaveBeenCalledTimes(1);
  });

  test('a batch the native reader throws on (a panic in Rust arrives as an error) is read by the TypeScript decoder, said once', () => {
    jest.spyOn(NativeRegistryColumns.prototype, 'decode').mockImplementation(() => {
      throw new Error('a panic');
    });
    const warn = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    const batch = (from: number) =>
      Array.from({ length: 5 }, (_, i) => msg(from + i, value(v1, 1, log(from + i))));
    const { compiled, reference } = decodeBoth('avro', [batch(0), batch(5), batch(10)], writers);
    expect(compiled).toEqual(reference);
    expect(compiled![2]!.rows).toHaveLength(5);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0]![0])).toContain('a panic');
  });

  test('leaves a batch of two writers, or of a writer not yet admitted, to the compiled reader', () => {
    const decode = jest.spyOn(NativeRegistryColumns.prototype, 'decode');
    const mixed = [
      msg(0, value(v1, 1, log(0))),
      msg(1, value(v2, 2, { ...log(1), release: 'r7' })),
      msg(2, value(v1, 1, log(2))),
    ];
    const secondWriter = [msg(3, value(v2, 2, { ...log(3), release: null }))];
    for (const batches of [[secondWriter], [mixed, mixed]]) {
      const { compiled, reference } = decodeBoth('avro', batches, writers);
      expect(compiled).toEqual(reference);
    }
    expect(decode).not.toHaveBeenCalled();
    // Both writers admitted by the mixed batch, a batch of v2 alone is read natively, `release` its own column.
    const { compiled, reference } = decodeBoth('avro', [mixed, secondWriter], writers);
    expect(compiled).toEqual(reference);
    expect(compiled![1]!.schema).toContain('release: Utf8 true');
    expect(decode).toHaveBeenCalledTimes(1);
  });
});

let nativeTypes = 0;
let protobufTypes = 0;
let protobufTaken = 0;
let protobufRecords = 0;

maybe('the native Protobuf reader', () => {
  test('takes exactly the messages the compiled reader takes and writes the same values, over generated types and messages', () => {
    fc.assert(
      fc.property(
        fc.integer(),
        fc.array(fc.tuple(fc.nat(), fc.constantFrom(...MUTATIONS)), { minLength: 1, maxLength: 30 }),
        (seed, plan) => {
          const r = new Random(seed);
          const generated = protoOf(r);
          const type = typeOf(generated.proto);
          const reader = protobufCompiledOf(generated.proto);
          protobufTypes += 1;
          if (!reader) return;
          expect(reader.native).toBeDefined();
          nativeTypes += 1;
          const messages = plan.map(([n, mutation], offset) =>
            msg(offset, mutatedMessage(r, type, generated, n, mutation)),
          );
          const { native, compiled, taken: rows } = bothRead(reader, messages);
          expect(native).toEqual(compiled);
          protobufRecords += messages.length;
          protobufTaken += rows;
        },
      ),
      { numRuns: 300, seed: 20261207 },
    );
    expect(nativeTypes / protobufTypes).toBeGreaterThan(0.3);
    expect(protobufTaken / protobufRecords).toBeGreaterThan(0.15);
  });

  test('takes and writes hand-made edge messages exactly as the compiled reader, in proto3, proto3 optional and proto2', () => {
    let taken = 0;
    for (const proto of [P3(''), P3('optional '), P2]) {
      const parsed = PROTOBUF_PAYLOADS.parse(proto, []);
      const first = protobufFramed(1, [0], new Uint8Array(0));
      PROTOBUF_PAYLOADS.decode(parsed, first);
      const reader = PROTOBUF_PAYLOADS.compiled!(parsed, first)!.reader;
      for (const [name, body] of Object.entries(BODIES)) {
        const { native, compiled } = bothRead(reader, [
          msg(0, protobufFramed(1, [0], Uint8Array.from(body))),
        ]);
        expect({ name, ...native }).toEqual({ name, ...compiled });
        if (native.rejected.length === 0) taken += 1;
      }
    }
    // Both kinds of verdict are compared: many bodies are read, many left to protobufjs.
    expect(taken).toBeGreaterThan(60);
    expect(taken).toBeLessThan(3 * Object.keys(BODIES).length - 60);
  });

  test('reads each message type of a file of nested types under its own message-index list only', () => {
    const NESTED = `syntax = "proto3";
      message A { int32 a = 1; message B { string b = 1; message C { bool c = 1; } message D { int64 d = 1; } } }
      message X { int32 x = 1; }
      message Y { string y = 1; message Q { message R { } message S { } message Z { uint32 z = 1; } message W { bool w = 1; } } }`;
    for (const path of [[0], [1], [0, 0], [0, 0, 1], [2, 0, 3], [2, 0, 2]]) {
      const parsed = PROTOBUF_PAYLOADS.parse(NESTED, []);
      const first = protobufFramed(1, path, new Uint8Array(0));
      PROTOBUF_PAYLOADS.decode(parsed, first);
      const reader = PROTOBUF_PAYLOADS.compiled!(parsed, first)!.reader;
      const body = Uint8Array.from([0x98, 0x06, 0x01]); // an unknown field 99
      const same = protobufFramed(1, path, body);
      expect(reader.native).toMatchObject({ prefix: [...same.subarray(5, same.length - body.length)] });
      // [0] written as a list of one: the compiled reader reads it, the native one leaves it.
      const listOfOne = Buffer.concat([Buffer.alloc(5), Buffer.from([2, 0]), body]);
      const other = protobufFramed(1, path.length === 1 ? [path[0]! + 1] : [9], body);
      const { native, compiled } = bothRead(reader, [msg(0, same), msg(1, listOfOne), msg(2, other)]);
      expect(compiled.rejected).toEqual(path.join('.') === '0' ? [2] : [1, 2]);
      expect(native.rejected).toEqual([1, 2]);
      expect(native.rows).toEqual(compiled.rows.slice(0, 1));
    }
  });

  const LOG = `syntax = "proto3";
    import "google/protobuf/timestamp.proto";
    message AppLog { google.protobuf.Timestamp ts = 1; string level = 2; optional int32 status = 6; double latency_ms = 7; Attrs attrs = 9; Level severity = 10; }
    message Attrs { string region = 1; int32 attempt = 2; sint64 seq = 3; }
    enum Level { INFO = 0; WARN = 1; }`;
  const root = protobuf.parse(LOG, new protobuf.Root(), { keepCase: true }).root;
  root.addJSON(protobuf.common.get('google/protobuf/timestamp.proto')!.nested!);
  const AppLog = root.lookupType('AppLog');
  const Attrs = root.lookupType('Attrs');
  const log = (i: number) =>
    AppLog.encode(
      AppLog.fromObject({
        ts: { seconds: 1764676800 + i, nanos: (i % 1000) * 1000 },
        level: i % 3 === 0 ? 'WARN' : 'INFO',
        ...(i % 4 === 0 ? {} : { status: 200 + i }),
        latency_ms: i / 7,
        ...(i % 5 === 0 ? {} : { attrs: { region: 'eu', attempt: i % 3, seq: -i } }),
        severity: i % 2,
      }),
    ).finish();

  test('reads the second message type of a file, framed with its message-index list [1]', () => {
    const parsed = PROTOBUF_PAYLOADS.parse(LOG, []);
    const values = [0, 1, 2].map((i) =>
      protobufFramed(4, [1], Attrs.encode(Attrs.fromObject({ region: `r${i}`, seq: i })).finish()),
    );
    PROTOBUF_PAYLOADS.decode(parsed, values[0]!);
    const reader = PROTOBUF_PAYLOADS.compiled!(parsed, values[0]!)!.reader;
    expect(reader.native).toMatchObject({ format: 'protobuf', prefix: [2, 2] });
    const { native, compiled } = bothRead(
      reader,
      values.map((v, i) => msg(i, v)),
    );
    expect(native).toEqual(compiled);
    expect(native.rejected).toEqual([]);
  });

  test('reads a batch of one admitted message type whole, with the rows and dead letters of the reference', () => {
    const decode = jest.spyOn(NativeRegistryColumns.prototype, 'decode');
    const writers = [{ id: 3, schemaType: 'PROTOBUF', schema: LOG }];
    const first = [0, 1, 2].map((i) => msg(i, protobufFramed(3, [0], log(i))));
    const second = [
      ...Array.from({ length: 40 }, (_, i) => msg(3 + i, protobufFramed(3, [0], log(3 + i)))),
      msg(43, protobufFramed(3, [0], log(43)).subarray(0, 12)), // cut short
      // [0] written as a list of one: the same type, but bytes the native reader leaves to the others.
      msg(44, Buffer.concat([Buffer.from([0, 0, 0, 0, 3, 2, 0]), log(44)])),
      msg(45, null),
    ];
    const { compiled, reference } = decodeBoth('protobuf', [first, second, second.slice(0, 40)], writers);
    expect(compiled).toEqual(reference);
    expect(compiled![2]!.rows).toHaveLength(40);
    expect(compiled![1]!.deadLetters.map((d) => d.reason)).toEqual(['undecodable-payload', 'tombstone']);
    // The second batch, with a value framed another way, stays with the compiled reader; the
    // third is read natively.
    expect(decode).toHaveBeenCalledTimes(1);
  });
});
