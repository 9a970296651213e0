/**
 * Hand-made Protobuf message bodies at the wire's edges — overlong and 5/10-byte varints, wire
 * types swapped, field 0 and tags beyond 32 bits, huge lengths, unknown fields of every wire
 * type, Timestamp and Duration nanos at their limits, enum numbers negative, unnamed and aliased,
 * float bit patterns — and the message types they are read as (proto3, proto3 `optional`, proto2
 * with an enum default). protobufjs never writes most of them; a producer may.
 */
/** An unsigned varint of `n`. */
const v = (n: bigint | number): number[] => {
  let x = BigInt(n);
  const out: number[] = [];
  while (x >= 0x80n) {
    out.push(Number(x & 0x7fn) | 0x80);
    x >>= 7n;
  }
  out.push(Number(x));
  return out;
};
const tag = (field: number, wire: number) => v(BigInt(field) * 8n + BigInt(wire));
const le = (hex: string) => [...Buffer.from(hex, 'hex')];

const WKT = `import "google/protobuf/timestamp.proto"; import "google/protobuf/duration.proto";`;
const FIELDS = (opt: string, m = '') => `
  ${opt}int32 a = 1; ${opt}E e = 2; ${opt}sint32 s = 4; ${opt}uint32 u = 5; ${opt}fixed64 f64 = 6;
  ${opt}sfixed64 sf64 = 7; ${opt}float fl = 8; ${opt}double d = 9; ${opt}bool b = 10; ${opt}string str = 1024;
  ${opt}bytes by = 536870911; ${opt}Al al = 11; ${m}N n = 12; ${m}google.protobuf.Timestamp ts = 13;
  ${m}google.protobuf.Duration du = 14; ${opt}int64 i64 = 15; ${opt}uint64 u64 = 16; ${opt}fixed32 f32 = 17; ${opt}sfixed32 sf32 = 18; ${opt}sint64 s64 = 19;`;
export const P3 = (opt: string) => `syntax = "proto3"; ${WKT}
  enum E { Z = 0; A = 5; B = -3; C = 7; }
  enum Al { option allow_alias = true; X = 0; Y = 0; W = 1; }
  message T { ${FIELDS(opt)} }
  message N { int32 x = 1; string y = 2; }`;
export const P2 = `syntax = "proto2"; ${WKT}
  enum E { A = 5; B = -3; C = 7; Z = 0; }
  enum Al { option allow_alias = true; X = 0; Y = 0; W = 1; }
  message T { ${FIELDS('optional ', 'optional ').replace('optional E e = 2;', 'optional E e = 2 [default = C];')} optional E e2 = 20; }
  message N { optional int32 x = 1; optional string y = 2; }`;

export const BODIES: Record<string, number[]> = {
  empty: [],
  int32_5byte_minus1: [...tag(1, 0), 0xff, 0xff, 0xff, 0xff, 0x0f],
  int32_5byte_35bits: [...tag(1, 0), 0xff, 0xff, 0xff, 0xff, 0x7f],
  int32_neg10: [...tag(1, 0), ...v(2n ** 64n - 1n)],
  int32_overlong0: [...tag(1, 0), 0x80, 0x00],
  int32_6byte: [...tag(1, 0), 0x80, 0x80, 0x80, 0x80, 0x80, 0x00],
  sint32_max: [...tag(4, 0), ...v(0xfffffffen)],
  sint32_min: [...tag(4, 0), ...v(0xffffffffn)],
  sint32_35bits: [...tag(4, 0), 0xfe, 0xff, 0xff, 0xff, 0x7f],
  uint32_big: [...tag(5, 0), ...v(2n ** 31n), ...tag(5, 0), ...v(2n ** 32n - 1n)],
  uint32_2_31: [...tag(5, 0), ...v(2n ** 31n + 5n)],
  fixed64_all: [...tag(6, 1), ...le('ffffffffffffffff'), ...tag(7, 1), ...le('0000000000000080')],
  float_nan: [...tag(8, 5), ...le('0000c07f')],
  float_negzero: [...tag(8, 5), ...le('00000080'), ...tag(9, 1), ...le('0000000000000080')],
  float_inf: [...tag(8, 5), ...le('0000807f')],
  float_denorm: [...tag(8, 5), ...le('01000000'), ...tag(9, 1), ...le('0100000000000000')],
  double_nan: [...tag(9, 1), ...le('010000000000f07f')],
  bool_2: [...tag(10, 0), 2],
  bool_overlong: [...tag(10, 0), 0x81, 0x00],
  enum_neg5: [...tag(2, 0), ...v(0xfffffffdn)],
  enum_neg10: [...tag(2, 0), ...v(2n ** 64n - 3n)],
  enum_unnamed: [...tag(2, 0), 4],
  enum_alias: [...tag(11, 0), 0],
  enum_20_absent_e: [...tag(11, 0), 1],
  wire_mix: [...tag(1, 0), 1, ...tag(1, 5), 1, 0, 0, 0],
  wire_mix2: [...tag(1, 5), 1, 0, 0, 0, ...tag(1, 0), 1],
  nested_last: [...tag(12, 2), ...v(2), ...tag(1, 0), 7, ...tag(12, 2), ...v(3), ...tag(2, 2), 1, 0x41],
  nested_empty: [...tag(12, 2), 0],
  ts_neg_nanos5: [...tag(13, 2), ...v(1 + 5), ...tag(2, 0), ...v(2n ** 32n - 1000n)],
  ts_frac: [...tag(13, 2), 2, ...tag(2, 0), 1],
  ts_9e9: [...tag(13, 2), ...v(1 + v(9e9).length), ...tag(1, 0), ...v(9e9)],
  ts_9e9p1: [...tag(13, 2), ...v(1 + v(9e9 + 1).length), ...tag(1, 0), ...v(9e9 + 1)],
  ts_field0: [...tag(13, 2), 4, 0x00, 0x00, ...tag(1, 0), 1],
  ts_unknown: [...tag(13, 2), 6, ...tag(3, 0), 0xff, 0xff, 0x01, ...tag(1, 0), 1],
  du_neg_nanos5: [...tag(14, 2), ...v(1 + 5), ...tag(2, 0), ...v(2n ** 32n - 2000n)],
  du_nanos_min: [...tag(14, 2), ...v(1 + 5), ...tag(2, 0), ...v(2n ** 31n)],
  unknown_varint10: [...tag(99, 0), ...v(2n ** 64n - 1n), ...tag(1, 0), 3],
  unknown_varint11: [...tag(99, 0), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
  unknown_group: [...tag(99, 3), ...tag(99, 4)],
  unknown_wire6: [...tag(99, 6)],
  field_1024: [...tag(1024, 2), 2, 0x68, 0x69],
  field_max: [...tag(536870911, 2), 1, 0xff],
  tag_above_u32: [0xff, 0xff, 0xff, 0xff, 0x1f, 0],
  tag_field0: [0x00, 0x00],
  tag_field0_wire2: [0x02, 0x00],
  huge_len: [...tag(536870911, 2), 0xff, 0xff, 0xff, 0xff, 0x0f],
  huge_len_unknown: [...tag(77, 2), 0xff, 0xff, 0xff, 0xff, 0x0f],
  utf8_surrogate: [...tag(1024, 2), 3, 0xed, 0xa0, 0x80],
  utf8_overlong: [...tag(1024, 2), 2, 0xc0, 0x80],
  utf8_long_bad: [...tag(1024, 2), ...v(301), ...new Array<number>(300).fill(0x61), 0xff],
  utf8_long_ok: [...tag(1024, 2), ...v(301), ...new Array<number>(297).fill(0x61), 0xf0, 0x9f, 0x98, 0x80],
  int64_2_53: [...tag(15, 0), ...v(2n ** 53n)],
  int64_2_53m1: [
    ...tag(15, 0),
    ...v(2n ** 53n - 1n),
    ...tag(16, 0),
    ...v(2n ** 53n - 1n),
    ...tag(19, 0),
    ...v(2n ** 53n - 1n),
  ],
  int64_9byte_small: [...tag(15, 0), 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00],
  fixed32s: [...tag(17, 5), ...le('ffffffff'), ...tag(18, 5), ...le('00000080')],
  trunc_fixed: [...tag(17, 5), 1, 2],
  string_as_varint: [...tag(1024, 0), 2, 0x68, 0x69],
  float_as_varint: [...tag(8, 0), 1, 0, 0, 0],
  nested_as_varint: [...tag(12, 0), 0],
};
