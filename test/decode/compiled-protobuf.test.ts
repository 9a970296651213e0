/**
 * The compiled Protobuf reader (src/decode/protobuf/compiled-reader.ts) against the reference
 * Protobuf decoder (protobufjs, protobuf-mapping.ts, the column codecs): over generated message
 * types and generated messages — edge values, fields out of order and repeated (the last one
 * counts), unknown fields, flipped bytes, cut and padded payloads — both must give the same rows
 * (every column, every system column), the same dead letters and the same segments.
 */
import fc from 'fast-check';
import * as protobuf from 'protobufjs';
import { PROTOBUF_PAYLOADS } from '../../src/decode/protobuf/protobuf-payloads';
import { protobufFramed } from '../support/protobuf-fixtures';
import { msg } from './fixture';
import { decodeBoth } from './compiled-vs-reference';
import { MUTATIONS, Random, compiledOf, mutatedMessage, protoOf, typeOf } from './protobuf-messages';

let compiledTypes = 0;
let types = 0;
let compiledRecords = 0;
let records = 0;

describe('the compiled Protobuf reader', () => {
  test('gives the rows, dead letters and segments the reference Protobuf decoder gives, over generated types and messages', () => {
    fc.assert(
      fc.property(
        fc.integer(),
        fc.array(fc.tuple(fc.nat(), fc.constantFrom(...MUTATIONS)), { minLength: 4, maxLength: 24 }),
        (seed, plan) => {
          const r = new Random(seed);
          const generated = protoOf(r);
          const type = typeOf(generated.proto);
          const reader = compiledOf(generated.proto);
          types += 1;
          if (reader) compiledTypes += 1;
          const messages = plan.map(([n, mutation], offset) => {
            const value = mutatedMessage(r, type, generated, n, mutation);
            records += 1;
            if (reader?.check(value, 0, value.length)) compiledRecords += 1;
            return msg(offset, value);
          });
          const half = Math.floor(messages.length / 2);
          const { compiled, reference } = decodeBoth(
            'protobuf',
            [messages.slice(0, half), messages.slice(half)],
            [{ id: 1, schemaType: 'PROTOBUF', schema: generated.proto }],
          );
          expect(compiled).toEqual(reference);
        },
      ),
      { numRuns: 200 },
    );
    // The comparison is only worth something if the compiled reader did much of the reading.
    expect(compiledTypes / types).toBeGreaterThan(0.4);
    expect(compiledRecords / records).toBeGreaterThan(0.15);
  });

  test('reads the bench log message (a Timestamp, a nested message, strings, numbers) itself, exactly as the reference', () => {
    const proto = `syntax = "proto3";
      import "google/protobuf/timestamp.proto";
      message AppLog { google.protobuf.Timestamp ts = 1; string level = 2; int32 status = 6; double latency_ms = 7; Attrs attrs = 9; }
      message Attrs { string region = 1; int32 attempt = 2; int64 seq = 3; }`;
    const root = protobuf.parse(proto, new protobuf.Root(), { keepCase: true }).root;
    root.addJSON(protobuf.common.get('google/protobuf/timestamp.proto')!.nested!);
    const AppLog = root.lookupType('AppLog');
    const values = [
      {
        ts: { seconds: 1764676800, nanos: 123000000 },
        level: 'INFO',
        status: 200,
        latency_ms: 1.25,
        attrs: { region: 'eu', attempt: 1, seq: 42 },
      },
      { level: 'WARN', attrs: {} },
      {},
    ].map((v) => protobufFramed(3, [0], AppLog.encode(AppLog.fromObject(v)).finish()));
    const parsed = PROTOBUF_PAYLOADS.parse(proto, []);
    PROTOBUF_PAYLOADS.decode(parsed, values[0]!);
    const reader = PROTOBUF_PAYLOADS.compiled!(parsed, values[0]!)!.reader;
    // A value inside a larger buffer, as in a batch.
    for (const v of values)
      expect(reader.check(Buffer.concat([Buffer.from([7]), v]), 1, v.length + 1)).toBe(true);
    const { compiled, reference } = decodeBoth(
      'protobuf',
      [values.map((v, i) => msg(i, v))],
      [{ id: 3, schemaType: 'PROTOBUF', schema: proto }],
    );
    expect(compiled).toEqual(reference);
    expect(compiled![0]!.rows[0]).toContain('"ts":1764676800123');
  });
});

describe('bytes the compiled reader must leave to protobufjs, which reads them otherwise', () => {
  /** The payloads after an empty message (the first record of a writer admits it; the compiled reader reads the next ones). */
  const sameAsReference = (proto: string, payloads: readonly number[][]) => {
    const values = [[], ...payloads].map((p) => protobufFramed(9, [0], Uint8Array.from(p)));
    const { compiled, reference } = decodeBoth(
      'protobuf',
      [values.map((v, i) => msg(i, v))],
      [{ id: 9, schemaType: 'PROTOBUF', schema: proto }],
    );
    expect(compiled).toEqual(reference);
    return { rows: reference![0]!.rows.slice(1) };
  };

  test('a 5-byte tag beyond 32 bits: protobufjs keeps its low 32 bits, so it names field 1 again', () => {
    const out = sameAsReference('syntax = "proto3"; message T { int32 a = 1; }', [
      [0x08, 0x05, 0x88, 0x80, 0x80, 0x80, 0x10, 0x07],
    ]);
    expect(out.rows[0]).toContain('"a":7');
  });

  test("a Timestamp's nanos under a 5-byte tag beyond 32 bits", () => {
    const proto =
      'syntax = "proto3"; import "google/protobuf/timestamp.proto"; message T { google.protobuf.Timestamp ts = 1; }';
    sameAsReference(proto, [[0x0a, 0x09, 0x08, 0x01, 0x90, 0x80, 0x80, 0x80, 0x10, 0x88, 0x27]]);
  });

  test('a group field sent length-delimited is what protobufjs makes of it, not a nested message', () => {
    sameAsReference('syntax = "proto2"; message T { optional group G = 1 { optional int32 a = 2; } }', [
      [0x0a, 0x02, 0x10, 0x05],
    ]);
  });
});
