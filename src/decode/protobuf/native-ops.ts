import * as protobuf from 'protobufjs';
import { HEADER_BYTES, messageIndexesOf } from '../../schema-registry/wire-format';

/**
 * A compiled Protobuf reader's message type as the native reader takes it
 * (native/json-columns/src/protobuf.rs): each field's number, type and absent value, the same
 * reading as compiled-reader.ts and field-values.ts give it (those stay the reference). Made
 * only for a type the compiled reader compiled, so every field has one.
 */
export type ProtobufKind =
  | 'int32'
  | 'sint32'
  | 'uint32'
  | 'int64'
  | 'sint64'
  | 'uint64'
  | 'bool'
  | 'double'
  | 'float'
  | 'fixed32'
  | 'sfixed32'
  | 'fixed64'
  | 'sfixed64'
  | 'string'
  | 'bytes'
  | 'timestamp'
  | 'duration';

export type ProtobufValueOp =
  | { readonly kind: ProtobufKind }
  /** The enum's numbers and their names. */
  | { readonly kind: 'enum'; readonly names: readonly (readonly [number, string])[] }
  | { readonly kind: 'message'; readonly message: ProtobufMessageOp };

/** What a message without the field holds there: null (presence), or its type's default. */
export type ProtobufAbsent =
  { readonly kind: 'null' | 'zero' | 'false' | 'empty' } | { readonly kind: 'name'; readonly name: string };

export interface ProtobufFieldOp {
  readonly number: number;
  readonly value: ProtobufValueOp;
  readonly absent: ProtobufAbsent;
}

export interface ProtobufMessageOp {
  readonly fields: readonly ProtobufFieldOp[];
}

/** Whether an absent field reads as null (else as its type's default): the compiled reader's rule too. */
export function hasPresence(f: protobuf.Field): boolean {
  return f.hasPresence || f.resolvedType instanceof protobuf.Type;
}

/** The name protobufjs's default of an absent enum field maps to (field-values.ts's enumValue). */
export function enumDefaultName(type: protobuf.Enum, fallbackDefault: unknown): string {
  const first = typeof fallbackDefault === 'number' ? fallbackDefault : 0;
  return type.valuesById[first] ?? String(first);
}

function fieldOp(f: protobuf.Field): ProtobufFieldOp {
  f.resolve();
  const resolved = f.resolvedType;
  const number = f.id;
  if (resolved instanceof protobuf.Type) {
    const name = resolved.fullName;
    const value: ProtobufValueOp =
      name === '.google.protobuf.Timestamp'
        ? { kind: 'timestamp' }
        : name === '.google.protobuf.Duration'
          ? { kind: 'duration' }
          : { kind: 'message', message: messageOp(resolved) };
    return { number, value, absent: { kind: 'null' } };
  }
  const present = hasPresence(f);
  const orNull = (absent: ProtobufAbsent): ProtobufAbsent => (present ? { kind: 'null' } : absent);
  if (resolved instanceof protobuf.Enum) {
    const names = Object.entries(resolved.valuesById).map(([id, n]) => [Number(id), n] as const);
    return {
      number,
      value: { kind: 'enum', names },
      absent: orNull({ kind: 'name', name: enumDefaultName(resolved, f.typeDefault) }),
    };
  }
  const kind = f.type as ProtobufKind;
  const absent: ProtobufAbsent =
    kind === 'bool'
      ? { kind: 'false' }
      : kind === 'string' || kind === 'bytes'
        ? { kind: 'empty' }
        : { kind: 'zero' };
  return { number, value: { kind }, absent: orNull(absent) };
}

/** The op of a message type the compiled reader compiled (compileFields accepted every field). */
export function messageOp(type: protobuf.Type): ProtobufMessageOp {
  return { fields: type.fieldsArray.map(fieldOp) };
}

/**
 * The message-index list of `path` as serializers write it (a lone 0 for the first type;
 * else the zig-zag count and indexes), or undefined when that is not what the framing reads
 * back as `path`: the native reader takes a value only when its list is these exact bytes.
 */
export function indexPrefixOf(path: string): number[] | undefined {
  const indexes = path.split('.').map(Number);
  const bytes: number[] = [];
  const varint = (n: number) => {
    let z = n >= 0 ? n * 2 : -n * 2 - 1;
    while (z >= 0x80) {
      bytes.push((z % 0x80) | 0x80);
      z = Math.floor(z / 0x80);
    }
    bytes.push(z);
  };
  if (path === '0') bytes.push(0);
  else {
    varint(indexes.length);
    indexes.forEach(varint);
  }
  const framing = messageIndexesOf(Uint8Array.from([0, 0, 0, 0, 0, ...bytes]));
  return 'invalid' in framing ||
    framing.indexes.join('.') !== path ||
    framing.payloadOffset !== HEADER_BYTES + bytes.length
    ? undefined
    : bytes;
}

const KINDS: readonly ProtobufKind[] = [
  'int32',
  'sint32',
  'uint32',
  'int64',
  'sint64',
  'uint64',
  'bool',
  'double',
  'float',
  'fixed32',
  'sfixed32',
  'fixed64',
  'sfixed64',
  'string',
  'bytes',
  'timestamp',
  'duration',
];
const ENUM = 17;
const MESSAGE = 18;
const ABSENT = { null: 0, zero: 1, false: 2, empty: 3, name: 4 } as const;

/** A message's op as protobuf.rs parses it: codes, and the enums' names in one list. */
export function protobufProgramOf(message: ProtobufMessageOp): { program: number[]; symbols: string[] } {
  const program: number[] = [];
  const symbols: string[] = [];
  const write = (m: ProtobufMessageOp): void => {
    program.push(m.fields.length);
    for (const { number, value, absent } of m.fields) {
      program.push(number, ABSENT[absent.kind]);
      if (absent.kind === 'name') program.push(symbols.push(absent.name) - 1);
      if (value.kind === 'enum') {
        program.push(ENUM, value.names.length);
        for (const [id, name] of value.names) program.push(id, symbols.push(name) - 1);
      } else if (value.kind === 'message') {
        program.push(MESSAGE);
        write(value.message);
      } else program.push(KINDS.indexOf(value.kind));
    }
  };
  write(message);
  return { program, symbols };
}
