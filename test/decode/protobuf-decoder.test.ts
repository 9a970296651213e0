import * as protobuf from 'protobufjs';
import type { WriterSchema } from '../../src/schema-registry/wire-format';
import { SYSTEM_FIELDS } from '../../src/staging/system-columns';
import { plainColumn } from '../support/avro-fixtures';
import {
  EVERYTHING_INDEXES,
  EVERYTHING_MESSAGES,
  EVERYTHING_PROTO,
  EVERYTHING_PROTO_ARROW_TYPES,
  EVERYTHING_PROTO_DESCRIPTOR,
  EVERYTHING_PROTO_EXPECTED,
  protobufFramed,
} from '../support/protobuf-fixtures';
import { decoder, msg } from './fixture';

const protobufDecoder = () => decoder({ format: 'protobuf' });
const registered = (id: number, schema: string, references?: Record<string, string>): WriterSchema => ({
  id,
  schemaType: 'PROTOBUF',
  schema,
  ...(references
    ? { references: Object.entries(references).map(([name, text]) => ({ name, schema: text })) }
    : {}),
});
const dataFields = (batch: { schema: { fields: { name: string; nullable: boolean }[] } }) =>
  batch.schema.fields.slice(SYSTEM_FIELDS.length);

/** Encodes with protobufjs, as a producer would (not through the decoder's parsing). */
function encoder(proto: string | readonly string[], type: string): (message: object) => Uint8Array {
  const root = new protobuf.Root();
  for (const file of typeof proto === 'string' ? [proto] : proto)
    protobuf.parse(file, root, { keepCase: true });
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

/**
 * A file whose map field comes before its nested message, and the file it imports (same
 * package), as .proto text and as protoc's descriptors (grpcio-tools 1.85.4, base64: what
 * Python's ProtobufSerializer registers). protoc puts the map's entry message among the
 * nested types where the map field is: Order.nested_types is [CountsEntry, Line], so
 * Python's and Java's serializers frame a Line with the message index [0, 1].
 */
const ORDER_PROTO = `syntax = "proto3";
package shop;
import "shop_money.proto";
message Order {
  map<string, int32> counts = 1;
  message Line {
    string sku = 1;
    shop.Money price = 2;
  }
  repeated Line lines = 2;
}`;
/**
 * ORDER_PROTO as Confluent's Java serializer registers it: the text it prints from protoc's
 * descriptor (fields first, the map's entry an explicit nested message in protoc's place).
 */
const ORDER_PRINTED = `syntax = "proto3";
package shop;

import "shop_money.proto";

message Order {
  repeated .shop.Order.CountsEntry counts = 1;
  repeated .shop.Order.Line lines = 2;

  message CountsEntry {
    option map_entry = true;

    string key = 1;
    int32 value = 2;
  }
  message Line {
    string sku = 1;
    .shop.Money price = 2;
  }
}
`;
const MONEY_PROTO =
  'syntax = "proto3"; package shop; message Money { string currency = 1; int64 units = 2; }';
const ORDER_DESCRIPTOR =
  'Cg5tYXBmaXJzdC5wcm90bxIEc2hvcBoQc2hvcF9tb25leS5wcm90byKxAQoFT3JkZXISJwoGY291bnRzGAEgAygLMhcuc2hvcC5P' +
  'cmRlci5Db3VudHNFbnRyeRIfCgVsaW5lcxgCIAMoCzIQLnNob3AuT3JkZXIuTGluZRotCgtDb3VudHNFbnRyeRILCgNrZXkYASAB' +
  'KAkSDQoFdmFsdWUYAiABKAU6AjgBGi8KBExpbmUSCwoDc2t1GAEgASgJEhoKBXByaWNlGAIgASgLMgsuc2hvcC5Nb25leWIGcHJv' +
  'dG8z';
const MONEY_DESCRIPTOR =
  'ChBzaG9wX21vbmV5LnByb3RvEgRzaG9wIigKBU1vbmV5EhAKCGN1cnJlbmN5GAEgASgJEg0KBXVuaXRzGAIgASgDYgZwcm90bzM=';

describe('Protobuf schemas as serializers register them: .proto text or a base64 FileDescriptorProto, with references', () => {
  const everything = (schema: string) => {
    const encode = encoder(EVERYTHING_PROTO, 'acme.Everything');
    return protobufDecoder().decode(
      't',
      0,
      EVERYTHING_MESSAGES.map((m, i) => msg(i, protobufFramed(7, EVERYTHING_INDEXES, encode(m)))),
      '',
      [registered(7, schema)],
    );
  };

  test("a base64 FileDescriptorProto (Python's serializer) maps to the .proto text's columns, in its order, with the same exact values", () => {
    const fromText = everything(EVERYTHING_PROTO);
    const fromDescriptor = everything(EVERYTHING_PROTO_DESCRIPTOR);
    expect(fromDescriptor.deadLetters).toEqual([]);
    const batch = fromDescriptor.batch!;
    const types = (b: typeof batch) =>
      dataFields(b).map((f) => [f.name, String(b.schema.fields.find((x) => x.name === f.name)!.type)]);
    expect(types(batch)).toEqual(types(fromText.batch!));
    expect(Object.fromEntries(types(batch))).toEqual(EVERYTHING_PROTO_ARROW_TYPES);
    for (const [name, values] of Object.entries(EVERYTHING_PROTO_EXPECTED)) {
      expect([name, plainColumn(batch, name)]).toEqual([name, values]);
    }
  });

  test('a nested message index ([1, 0]: Everything.Point) names the same message in both forms', () => {
    const encode = encoder(EVERYTHING_PROTO, 'acme.Everything.Point');
    for (const schema of [EVERYTHING_PROTO, EVERYTHING_PROTO_DESCRIPTOR]) {
      const out = protobufDecoder().decode(
        't',
        0,
        [msg(0, protobufFramed(7, [1, 0], encode({ x: 1.5, y: -2 })))],
        '',
        [registered(7, schema)],
      );
      expect(out.deadLetters).toEqual([]);
      expect(dataFields(out.batch!).map((f) => f.name)).toEqual(['x', 'y']);
      expect([plainColumn(out.batch!, 'x'), plainColumn(out.batch!, 'y')]).toEqual([[1.5], [-2]]);
    }
  });

  test.each([
    ['a descriptor', ORDER_DESCRIPTOR],
    ["the text Java's serializer prints from one", ORDER_PRINTED],
  ])(
    '%s: a map-entry message counts among the nested types where protoc put it ([0, 1] is Order.Line), and the map is a map column',
    (_form, schema) => {
      const line = encoder([ORDER_PROTO, MONEY_PROTO], 'shop.Order.Line');
      const order = encoder([ORDER_PROTO, MONEY_PROTO], 'shop.Order');
      const schemas = [registered(3, schema, { 'shop_money.proto': MONEY_DESCRIPTOR })];
      const one = (indexes: number[], value: Uint8Array) => {
        const out = protobufDecoder().decode(
          't',
          0,
          [msg(0, protobufFramed(3, indexes, value))],
          '',
          schemas,
        );
        expect(out.deadLetters).toEqual([]);
        return out.batch!;
      };
      const lineRow = one([0, 1], line({ sku: 'a-1', price: { currency: 'EUR', units: '12' } }));
      expect(dataFields(lineRow).map((f) => f.name)).toEqual(['sku', 'price']);
      expect(plainColumn(lineRow, 'price')).toEqual([{ currency: 'EUR', units: 12n }]);
      const orderRow = one([0], order({ counts: { a: 2 }, lines: [{ sku: 'b' }] }));
      expect(String(orderRow.schema.fields.find((f) => f.name === 'counts')!.type)).toBe(
        'List<Struct<{key:Utf8, value:Int32}>>',
      );
      expect(plainColumn(orderRow, 'counts')).toEqual([[{ key: 'a', value: 2 }]]);
      expect(plainColumn(orderRow, 'lines')).toEqual([[{ sku: 'b', price: null }]]);
    },
  );

  test("two messages of one schema id each add their own columns: the second message's values are not dropped", () => {
    const line = encoder([ORDER_PROTO, MONEY_PROTO], 'shop.Order.Line');
    const order = encoder([ORDER_PROTO, MONEY_PROTO], 'shop.Order');
    const out = protobufDecoder().decode(
      't',
      0,
      [
        msg(0, protobufFramed(3, [0, 1], line({ sku: 'a' }))),
        msg(1, protobufFramed(3, [0], order({ counts: { k: 1 } }))),
      ],
      '',
      [registered(3, ORDER_DESCRIPTOR, { 'shop_money.proto': MONEY_DESCRIPTOR })],
    );
    expect(out.deadLetters).toEqual([]);
    const batches = [...out.earlier.map((s) => s.batch), out.batch!];
    const column = (name: string) =>
      batches.flatMap((b) => (b.schema.fields.some((f) => f.name === name) ? plainColumn(b, name) : [null]));
    expect(column('sku')).toEqual(['a', null]);
    expect(column('counts')).toEqual([null, [{ key: 'k', value: 1 }]]);
  });

  test("references resolve in either form, mixed, and a reference's messages in the same package do not shift the file's top-level indexes", () => {
    const encode = encoder([ORDER_PROTO, MONEY_PROTO], 'shop.Order');
    const value = encode({ lines: [{ sku: 'x', price: { currency: 'USD', units: '-3' } }] });
    for (const [schema, money] of [
      [ORDER_DESCRIPTOR, MONEY_PROTO],
      [ORDER_PROTO, MONEY_DESCRIPTOR],
      [ORDER_PROTO, MONEY_PROTO],
    ] as const) {
      const out = protobufDecoder().decode('t', 0, [msg(0, protobufFramed(4, [0], value))], '', [
        registered(4, schema, { 'shop_money.proto': money }),
      ]);
      expect(out.deadLetters).toEqual([]);
      expect(plainColumn(out.batch!, 'lines')).toEqual([
        [{ sku: 'x', price: { currency: 'USD', units: -3n } }],
      ]);
    }
  });

  test('a reference the registry lacks, or an import neither referenced nor well-known, makes the schema unsupported, naming the file', () => {
    const value = encoder([ORDER_PROTO, MONEY_PROTO], 'shop.Order')({});
    const out = protobufDecoder().decode(
      't',
      0,
      [msg(0, protobufFramed(5, [0], value)), msg(1, protobufFramed(6, [0], value))],
      '',
      [
        {
          id: 5,
          schemaType: 'PROTOBUF',
          schema: ORDER_DESCRIPTOR,
          references: [
            { name: 'shop_money.proto', missing: 'subject "shop_money.proto" version 1: not found' },
          ],
        },
        registered(6, ORDER_DESCRIPTOR),
      ],
    );
    expect(out.deadLetters.map((d) => [d.reason, d.detail])).toEqual([
      [
        'unsupported-schema',
        expect.stringMatching(
          /^schema id 5: .*its reference "shop_money.proto" is not in the registry: subject "shop_money.proto" version 1: not found/,
        ),
      ],
      [
        'unsupported-schema',
        expect.stringMatching(
          /^schema id 6: .*it imports "shop_money.proto", which is neither among its schema references/,
        ),
      ],
    ]);
  });
});
