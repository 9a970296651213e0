import * as protobuf from 'protobufjs';
import type { WriterSchema } from '../../src/schema-registry/wire-format';
import { SYSTEM_FIELDS } from '../../src/staging/system-columns';
import { plainColumn } from '../support/avro-fixtures';
import {
  EVERYTHING_INDEXES,
  EVERYTHING_MESSAGES,
  EVERYTHING_PROTO,
  EVERYTHING_PROTO_ARROW_TYPES,
  EVERYTHING_PROTO_EXPECTED,
  protobufFramed,
} from '../support/protobuf-fixtures';
import { decoder, msg } from './fixture';

const protobufDecoder = () => decoder({ format: 'protobuf' });
const registered = (id: number, schema: string): WriterSchema => ({ id, schemaType: 'PROTOBUF', schema });
const dataFields = (batch: { schema: { fields: { name: string; nullable: boolean }[] } }) =>
  batch.schema.fields.slice(SYSTEM_FIELDS.length);

/** Encodes with protobufjs, as a producer would (not through the decoder's parsing). */
function encoder(proto: string, type: string): (message: object) => Uint8Array {
  const root = protobuf.parse(proto, new protobuf.Root(), { keepCase: true }).root;
  for (const name of ['timestamp', 'duration', 'wrappers'])
    root.addJSON(protobuf.common.get(`google/protobuf/${name}.proto`)!.nested!);
  const t = root.lookupType(type);
  return (message) => t.encode(t.fromObject(message)).finish();
}

const V1 = 'syntax = "proto3"; package demo; message Log { int64 n = 1; string message = 2; }';
const V2 =
  'syntax = "proto3"; package demo; message Log { int64 n = 1; string message = 2; optional string region = 3; }';

describe('Protobuf messages in the Confluent wire format', () => {
  test('every mapped Protobuf type becomes its Arrow column with the exact value; the message index picks the type', () => {
    const encode = encoder(EVERYTHING_PROTO, 'acme.Everything');
    const out = protobufDecoder().decode(
      't',
      0,
      EVERYTHING_MESSAGES.map((m, i) => msg(i, protobufFramed(7, EVERYTHING_INDEXES, encode(m)))),
      '',
      [registered(7, EVERYTHING_PROTO)],
    );
    expect(out.deadLetters).toEqual([]);
    const batch = out.batch!;
    expect(
      Object.fromEntries(
        dataFields(batch).map((f) => [
          f.name,
          String(batch.schema.fields.find((x) => x.name === f.name)!.type),
        ]),
      ),
    ).toEqual(EVERYTHING_PROTO_ARROW_TYPES);
    expect(dataFields(batch).every((f) => f.nullable)).toBe(true);
    for (const [name, values] of Object.entries(EVERYTHING_PROTO_EXPECTED)) {
      expect([name, plainColumn(batch, name)]).toEqual([name, values]);
    }
  });

  test('a nested message named by a two-level message index ([1, 1]: Everything.Inner) is read as that type', () => {
    const encode = encoder(EVERYTHING_PROTO, 'acme.Everything.Inner');
    const out = protobufDecoder().decode(
      't',
      0,
      [msg(0, protobufFramed(7, [1, 1], encode({ depth: 3 })))],
      '',
      [registered(7, EVERYTHING_PROTO)],
    );
    expect(out.deadLetters).toEqual([]);
    expect(dataFields(out.batch!).map((f) => f.name)).toEqual(['depth']);
    expect(plainColumn(out.batch!, 'depth')).toEqual([3]);
  });

  test('maps with 64-bit and boolean keys keep their keys typed and exact', () => {
    const proto =
      'syntax = "proto3"; message M { map<int64, string> by_id = 1; map<bool, uint64> flags = 2; }';
    const type = protobuf.parse(proto, new protobuf.Root(), { keepCase: true }).root.lookupType('M');
    const m = type.create({
      by_id: { '-9223372036854775808': 'min' }, // protobufjs's encoder takes a 64-bit key as its digits
      flags: { true: '18446744073709551615' },
    });
    const out = protobufDecoder().decode(
      't',
      0,
      [msg(0, protobufFramed(2, [0], type.encode(m).finish()))],
      '',
      [registered(2, proto)],
    );
    expect(out.deadLetters).toEqual([]);
    expect(plainColumn(out.batch!, 'by_id')).toEqual([[{ key: -9_223_372_036_854_775_808n, value: 'min' }]]);
    expect(plainColumn(out.batch!, 'flags')).toEqual([[{ key: true, value: 18_446_744_073_709_551_615n }]]);
  });

  test("a newer writer schema's new optional field becomes a new nullable column; older messages read null there", () => {
    const d = protobufDecoder();
    const v1 = encoder(V1, 'demo.Log');
    const v2 = encoder(V2, 'demo.Log');
    const out = d.decode(
      't',
      0,
      [
        msg(0, protobufFramed(1, [0], v1({ n: 1, message: 'a' }))),
        msg(1, protobufFramed(2, [0], v2({ n: 2, message: 'b', region: 'eu' }))),
        msg(2, protobufFramed(1, [0], v1({ n: 3, message: 'c' }))),
      ],
      '',
      [registered(1, V1), registered(2, V2)],
    );
    expect(out.deadLetters).toEqual([]);
    expect(dataFields(out.batch!).map((f) => f.name)).toEqual(['n', 'message', 'region']);
    expect(plainColumn(out.batch!, 'region')).toEqual([null, 'eu', null]);
  });

  test('each kind of bad value is a dead letter with its reason and the schema id', () => {
    const good = encoder(V1, 'demo.Log')({ n: 1, message: 'hello' });
    const subMicro = encoder(EVERYTHING_PROTO, 'acme.Everything')({ ts: { seconds: '1', nanos: 1 } });
    const recursive = 'syntax = "proto3"; message Node { Node next = 1; }';
    const imported = 'syntax = "proto3"; import "other/thing.proto"; message M { int32 a = 1; }';
    const out = protobufDecoder().decode(
      't',
      0,
      [
        msg(0, Uint8Array.from([1, 0, 0, 0, 1, 0, ...good])), // magic byte 1
        msg(1, protobufFramed(404, [0], good)), // the registry does not know 404
        msg(2, protobufFramed(1, [3], good)), // V1 has one message, not four
        msg(3, Uint8Array.from([0, 0, 0, 0, 1, ...good])), // no message-index list: 0x08 reads as count 4
        msg(4, protobufFramed(1, [0], good.subarray(0, good.length - 2))), // truncated
        msg(5, protobufFramed(9, [0], good)), // an Avro schema
        msg(6, protobufFramed(10, [0], Uint8Array.from([]))), // a recursive message
        msg(7, protobufFramed(11, [0], good)), // imports a file the registry would reference
        msg(8, protobufFramed(7, EVERYTHING_INDEXES, subMicro)), // a Timestamp below a microsecond
        // message = "a" and a character cut short (e2 82 of the 3-byte €)
        msg(9, protobufFramed(1, [0], Uint8Array.from([0x08, 0x01, 0x12, 0x03, 0x61, 0xe2, 0x82]))),
        msg(10, protobufFramed(1, [0], good)),
      ],
      '',
      [
        registered(1, V1),
        { id: 404, unknown: 'Schema 404 not found' },
        { id: 9, schemaType: 'AVRO', schema: '"string"' },
        registered(10, recursive),
        registered(11, imported),
        registered(7, EVERYTHING_PROTO),
      ],
    );
    expect(out.deadLetters.map((v) => [v.offset, v.reason])).toEqual([
      [0, 'wrong-magic-byte'],
      [1, 'unknown-schema-id'],
      [2, 'invalid-message-index'],
      [3, 'invalid-message-index'],
      [4, 'undecodable-payload'],
      [5, 'unsupported-schema'],
      [6, 'unsupported-schema'],
      [7, 'unsupported-schema'],
      [8, 'undecodable-payload'],
      [9, 'undecodable-payload'],
    ]);
    const details = out.deadLetters.map((v) => v.detail);
    expect(details[1]).toMatch(/^schema id 404: the registry has no such schema/);
    expect(details[2]).toMatch(
      /^schema id 1: message index \[3\]: the file has 1 message type\(s\) at that level, none at index 3/,
    );
    expect(details[3]).toMatch(/^schema id 1: /);
    expect(details[4]).toMatch(/^schema id 1: the payload is not a demo.Log message/);
    expect(details[5]).toMatch(/^schema id 9: a AVRO schema, and the format is protobuf/);
    expect(details[6]).toMatch(/^schema id 10: message Node: message .?Node contains itself/);
    expect(details[7]).toMatch(/^schema id 11: .*imports "other\/thing.proto"/);
    expect(details[8]).toMatch(/^schema id 7: a google.protobuf.Timestamp with 1 nanoseconds/);
    expect(details[9]).toMatch(/^schema id 1: .*a string field that is not valid UTF-8/);
    expect(plainColumn(out.batch!, 'message')).toEqual(['hello']);
  });
});
