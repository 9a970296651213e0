import { zigzagVarint } from './varint';

/**
 * A .proto file with every type the Protobuf mapping handles (src/decode/protobuf/
 * protobuf-mapping.ts), messages of it, and what each column reads back as from Arrow and
 * from LanceDB. Shared by the decoder's unit tests and the registry round trip.
 * `Other` comes first, so that `Everything` is message index [1]: a reader that takes the
 * file's first message instead of the one the index names reads the wrong type.
 */
export const EVERYTHING_PROTO = `syntax = "proto3";
package acme;

import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";

message Other {
  string note = 1;
}

message Everything {
  enum Color {
    RED = 0;
    GREEN = 1;
  }
  message Point {
    double x = 1;
    optional double y = 2;
  }
  message Inner {
    int32 depth = 1;
  }
  bool b = 1;
  int32 i32 = 2;
  sint32 s32 = 3;
  uint32 u32 = 4;
  int64 i64 = 5;
  sint64 s64 = 6;
  uint64 u64 = 7;
  fixed64 f64 = 8;
  float f = 9;
  double d = 10;
  string s = 11;
  bytes raw = 12;
  Color color = 13;
  optional string opt = 14;
  Point point = 15;
  repeated string tags = 16;
  repeated Point points = 17;
  map<string, int64> attrs = 18;
  oneof choice {
    int32 number = 19;
    string text = 20;
  }
  google.protobuf.Timestamp ts = 21;
  google.protobuf.Duration took = 22;
  google.protobuf.Int64Value maybe_long = 23;
  google.protobuf.StringValue maybe_text = 24;
}
`;

/**
 * EVERYTHING_PROTO as Python's ProtobufSerializer registers it: protoc's FileDescriptorProto
 * of the file (grpcio-tools 1.85.4, `everything_pb2.DESCRIPTOR.serialized_pb`), base64.
 */
export const EVERYTHING_PROTO_DESCRIPTOR =
  'ChBldmVyeXRoaW5nLnByb3RvEgRhY21lGh9nb29nbGUvcHJvdG9idWYvdGltZXN0YW1wLnByb3RvGh5nb29nbGUvcHJvdG9i' +
  'dWYvZHVyYXRpb24ucHJvdG8aHmdvb2dsZS9wcm90b2J1Zi93cmFwcGVycy5wcm90byIVCgVPdGhlchIMCgRub3RlGAEgASgJ' +
  'ItcFCgpFdmVyeXRoaW5nEgkKAWIYASABKAgSCwoDaTMyGAIgASgFEgsKA3MzMhgDIAEoERILCgN1MzIYBCABKA0SCwoDaTY0' +
  'GAUgASgDEgsKA3M2NBgGIAEoEhILCgN1NjQYByABKAQSCwoDZjY0GAggASgGEgkKAWYYCSABKAISCQoBZBgKIAEoARIJCgFz' +
  'GAsgASgJEgsKA3JhdxgMIAEoDBIlCgVjb2xvchgNIAEoDjIWLmFjbWUuRXZlcnl0aGluZy5Db2xvchIQCgNvcHQYDiABKAlI' +
  'AYgBARIlCgVwb2ludBgPIAEoCzIWLmFjbWUuRXZlcnl0aGluZy5Qb2ludBIMCgR0YWdzGBAgAygJEiYKBnBvaW50cxgRIAMo' +
  'CzIWLmFjbWUuRXZlcnl0aGluZy5Qb2ludBIqCgVhdHRycxgSIAMoCzIbLmFjbWUuRXZlcnl0aGluZy5BdHRyc0VudHJ5EhAK' +
  'Bm51bWJlchgTIAEoBUgAEg4KBHRleHQYFCABKAlIABImCgJ0cxgVIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXAS' +
  'JwoEdG9vaxgWIAEoCzIZLmdvb2dsZS5wcm90b2J1Zi5EdXJhdGlvbhIvCgptYXliZV9sb25nGBcgASgLMhsuZ29vZ2xlLnBy' +
  'b3RvYnVmLkludDY0VmFsdWUSMAoKbWF5YmVfdGV4dBgYIAEoCzIcLmdvb2dsZS5wcm90b2J1Zi5TdHJpbmdWYWx1ZRooCgVQ' +
  'b2ludBIJCgF4GAEgASgBEg4KAXkYAiABKAFIAIgBAUIECgJfeRoWCgVJbm5lchINCgVkZXB0aBgBIAEoBRosCgpBdHRyc0Vu' +
  'dHJ5EgsKA2tleRgBIAEoCRINCgV2YWx1ZRgCIAEoAzoCOAEiGwoFQ29sb3ISBwoDUkVEEAASCQoFR1JFRU4QAUIICgZjaG9p' +
  'Y2VCBgoEX29wdGIGcHJvdG8z';

/** Everything's message-index path: the second top-level message. */
export const EVERYTHING_INDEXES = [1] as const;

/** Two messages, as protobufjs's `fromObject` takes them (64-bit values as decimal strings). */
export const EVERYTHING_MESSAGES = [
  {
    b: true,
    i32: -7,
    s32: -8,
    u32: 4_294_967_295,
    i64: '-9223372036854775808',
    s64: '9007199254740993',
    u64: '18446744073709551615',
    f64: '1',
    f: 1.5,
    d: -2.25,
    s: 'héllo',
    raw: Buffer.from([0, 1, 2]),
    color: 'GREEN',
    opt: 'set',
    point: { x: 1 },
    tags: ['a', 'b'],
    points: [{ x: 1, y: 2 }],
    attrs: { one: '1', two: '2' },
    number: 42,
    ts: { seconds: '1764676800', nanos: 123_456_000 }, // 2025-12-02T12:00:00.123456Z
    took: { seconds: '1', nanos: 500_000_000 },
    maybe_long: { value: '9223372036854775807' },
    maybe_text: { value: '' },
  },
  // Nothing set but a oneof member and an enum number the enum does not name (open enums keep it).
  { text: 'x', color: 7 },
] as const;

/** What each column holds for the two messages (plain values as avro-fixtures' plainColumn gives them). */
export const EVERYTHING_PROTO_EXPECTED: Record<string, readonly unknown[]> = {
  b: [true, false],
  i32: [-7, 0],
  s32: [-8, 0],
  u32: [4_294_967_295, 0],
  i64: [-9_223_372_036_854_775_808n, 0n],
  s64: [9_007_199_254_740_993n, 0n],
  u64: [18_446_744_073_709_551_615n, 0n],
  f64: [1n, 0n],
  f: [1.5, 0],
  d: [-2.25, 0],
  s: ['héllo', ''],
  raw: [[0, 1, 2], []],
  color: ['GREEN', '7'],
  opt: ['set', null],
  point: [{ x: 1, y: null }, null],
  tags: [['a', 'b'], []],
  points: [[{ x: 1, y: 2 }], []],
  attrs: [
    [
      { key: 'one', value: 1n },
      { key: 'two', value: 2n },
    ],
    [],
  ],
  number: [42, null],
  text: [null, 'x'],
  ts: [1_764_676_800_123_456n, null],
  took: [1_500_000n, null],
  maybe_long: [9_223_372_036_854_775_807n, null],
  maybe_text: ['', null],
};

export const EVERYTHING_PROTO_ARROW_TYPES: Record<string, string> = {
  b: 'Bool',
  i32: 'Int32',
  s32: 'Int32',
  u32: 'Uint32',
  i64: 'Int64',
  s64: 'Int64',
  u64: 'Uint64',
  f64: 'Uint64',
  f: 'Float32',
  d: 'Float64',
  s: 'Utf8',
  raw: 'Binary',
  color: 'Utf8',
  opt: 'Utf8',
  point: 'Struct<{x:Float64, y:Float64}>',
  tags: 'List<Utf8>',
  points: 'List<Struct<{x:Float64, y:Float64}>>',
  attrs: 'List<Struct<{key:Utf8, value:Int64}>>',
  number: 'Int32',
  text: 'Utf8',
  ts: 'Timestamp<MICROSECOND, UTC>',
  took: 'Int64',
  maybe_long: 'Int64',
  maybe_text: 'Utf8',
};

/**
 * A value as Confluent's Protobuf serializer frames it: magic byte 0, the schema id, the
 * message-index list (the single byte 0 for [0], else a count and the indexes, zig-zag
 * varints), the message.
 */
export function protobufFramed(schemaId: number, indexes: readonly number[], message: Uint8Array): Buffer {
  const list =
    indexes.length === 1 && indexes[0] === 0 ? [0] : [indexes.length, ...indexes].flatMap(zigzagVarint);
  const header = Buffer.alloc(5);
  header.writeUInt32BE(schemaId, 1);
  return Buffer.concat([header, Buffer.from(list), message]);
}
