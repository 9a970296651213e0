/**
 * Generated Protobuf message types and messages (edge values, nested messages, enums,
 * Timestamps and Durations, presence), shared by the tests of the compiled reader and of its
 * native twin.
 */
import * as protobuf from 'protobufjs';
import { PROTOBUF_PAYLOADS } from '../../src/decode/protobuf/protobuf-payloads';
import { protobufFramed } from '../support/protobuf-fixtures';

export { SeededRandom as Random } from '../support/seeded-random';
import type { SeededRandom as Random } from '../support/seeded-random';

/** Each scalar type and values that lean to its edges (protobufjs's fromObject takes them). */
export const SCALARS: Readonly<Record<string, readonly unknown[]>> = {
  int32: [0, 1, -1, 300, 2147483647, -2147483648],
  sint32: [0, 1, -1, 2147483647, -2147483648],
  uint32: [0, 1, 4294967295],
  int64: ['0', '1', '-1', '9007199254740991', '9007199254740993', '-9223372036854775808'],
  sint64: ['0', '-1', '4503599627370495', '-4503599627370497', '9223372036854775807'],
  uint64: ['0', '1', '9007199254740992', '18446744073709551615'],
  fixed32: [0, 4294967295],
  sfixed32: [0, -2147483648],
  fixed64: ['0', '18446744073709551615'],
  sfixed64: ['0', '-9223372036854775808', '42'],
  bool: [true, false],
  float: [0, 1.5, -0, 3.4e38, Number.NaN, Number.POSITIVE_INFINITY],
  double: [0, -2.5e-300, 1e308, Number.NaN, Number.NEGATIVE_INFINITY],
  string: ['', 'héllo', 'x'.repeat(40), '0'],
  bytes: [new Uint8Array(0), Uint8Array.from([0, 255, 128])],
};

export interface Generated {
  readonly proto: string;
  /** A value generator for the top-level message `T`. */
  readonly value: (r: Random) => Record<string, unknown>;
}

/** A proto3 file of a top-level message T (and the nested messages and enum it uses). */
export function protoOf(r: Random): Generated {
  const messages: string[] = [];
  let counter = 0;
  const message = (depth: number): { name: string; value: (r: Random) => Record<string, unknown> } => {
    const name = `M${counter++}`;
    const fields: string[] = [];
    const values: ((r: Random, out: Record<string, unknown>) => void)[] = [];
    const count = 1 + r.int(5);
    for (let i = 0; i < count; i++) {
      const field = `f${i}`;
      const number = r.pick([i + 1, i + 1, i + 1, 2000 + i]);
      const kind = r.int(10);
      const optional = r.next() < 0.3 ? 'optional ' : '';
      const absent = r.next() < 0.2;
      if (kind < 6) {
        const type = r.pick(Object.keys(SCALARS));
        fields.push(`${optional}${type} ${field} = ${number};`);
        values.push((r, out) => {
          if (!absent || r.next() < 0.5) out[field] = r.pick(SCALARS[type]!);
        });
      } else if (kind === 6) {
        fields.push(`${optional}Color ${field} = ${number};`);
        values.push((r, out) => {
          if (!absent) out[field] = r.pick([0, 1, 2, 7]);
        });
      } else if (kind === 7 && depth < 2) {
        const inner = message(depth + 1);
        fields.push(`${inner.name} ${field} = ${number};`);
        values.push((r, out) => {
          if (r.next() < 0.8) out[field] = inner.value(r);
        });
      } else if (kind === 8) {
        const type = r.pick(['Timestamp', 'Duration']);
        fields.push(`google.protobuf.${type} ${field} = ${number};`);
        values.push((r, out) => {
          if (r.next() < 0.8)
            out[field] = {
              seconds: r.pick(['0', '1764676800', '-1', '8999999999', '9000000001', '253402300800']),
              nanos: r.pick([0, 1000, 999999000, 1, -1000]),
            };
        });
      } else {
        // A repeated field: the whole type is left to the reference.
        fields.push(`repeated int32 ${field} = ${number};`);
        values.push((r, out) => {
          out[field] = [1, -1].slice(0, r.int(3));
        });
      }
    }
    messages.push(`message ${name} { ${fields.join(' ')} }`);
    return {
      name,
      value: (r) => {
        const out: Record<string, unknown> = {};
        for (const v of values) v(r, out);
        return out;
      },
    };
  };
  const top = message(0);
  // The top-level type comes first in the file: message index [0].
  const ordered = [
    messages[messages.length - 1]!.replace(`message ${top.name} `, 'message T '),
    ...messages.slice(0, -1),
  ];
  return {
    proto: [
      'syntax = "proto3";',
      'import "google/protobuf/timestamp.proto";',
      'import "google/protobuf/duration.proto";',
      'enum Color { RED = 0; GREEN = 1; BLUE = 2; }',
      ...ordered,
    ]
      .join('\n')
      .replace(new RegExp(`\\b${top.name}\\b`, 'g'), 'T'),
    value: top.value,
  };
}

export function typeOf(proto: string): protobuf.Type {
  const root = protobuf.parse(proto, new protobuf.Root(), { keepCase: true }).root;
  for (const name of ['timestamp', 'duration'])
    root.addJSON(protobuf.common.get(`google/protobuf/${name}.proto`)!.nested!);
  return root.lookupType('T');
}

/** The compiled reader of a file's type T, when it has one. */
export function compiledOf(proto: string) {
  const parsed = PROTOBUF_PAYLOADS.parse(proto, []);
  const value = protobufFramed(1, [0], new Uint8Array(0));
  PROTOBUF_PAYLOADS.decode(parsed, value); // maps the type, as a first record does
  return PROTOBUF_PAYLOADS.compiled!(parsed, value)?.reader;
}

/** How a generated message is sent: as encoded, or changed so that readers must refuse or read it otherwise. */
export type Mutation = 'keep' | 'twice' | 'unknown' | 'flip' | 'cut' | 'pad';
export const MUTATIONS: readonly Mutation[] = [
  'keep',
  'keep',
  'keep',
  'twice',
  'unknown',
  'flip',
  'cut',
  'pad',
];

/** A generated message of `type`, changed by `mutation` (`n` picks the byte), framed with schema id 1 and [0]. */
export function mutatedMessage(
  r: Random,
  type: protobuf.Type,
  generated: Generated,
  n: number,
  mutation: Mutation,
): Buffer {
  const encode = () => [...type.encode(type.fromObject(generated.value(r))).finish()];
  let bytes = encode();
  // Two messages one after the other are one message: each field's last value counts.
  if (mutation === 'twice') bytes = [...bytes, ...encode()];
  if (mutation === 'unknown') bytes = [0xf8, 0xff, 0x3f, 5, 0x82, 0x80, 0x40, 1, 9, ...bytes];
  if (mutation === 'flip' && bytes.length > 0) bytes[n % bytes.length] = r.int(256);
  if (mutation === 'cut' && bytes.length > 0) bytes.length = n % bytes.length;
  if (mutation === 'pad') bytes.push(r.int(256));
  return protobufFramed(1, [0], Uint8Array.from(bytes));
}
