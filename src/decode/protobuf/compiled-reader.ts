import * as protobuf from 'protobufjs';
import type { DeclaredField } from '../../config';
import type { ColumnBuilder } from '../column-builder';
import { utf8At } from '../utf8-bytes';
import type { CompiledReader } from '../compiled-reader';
import type { NumericBuilder } from '../declared-builders';
import type { BoolBuilder, FixedWidthBuilder } from '../fixed-width-builders';
import type { StructBuilder } from '../nested-builders';
import type { VariableWidthBuilder } from '../variable-width-builders';
import { HEADER_BYTES, messageIndexesOf } from '../../schema-registry/wire-format';

/**
 * A reader compiled once per Protobuf message type that reads a message's binary straight
 * into the column builders: no protobufjs object, no row, no codec conversion per record
 * (protobuf-mapping.ts and protobufjs remain the reference, as avro/compiled-reader.ts is
 * beside avsc). It is built from protobufjs's reflection beside the columns the mapping gave
 * the type, so both agree on the columns by construction.
 *
 * A message's fields may come in any order and a field more than once (the last one counts,
 * as in protobufjs), so a message is read in two steps: its tags are scanned for where each
 * field's last value starts, then its columns are written in their order from there, absent
 * fields as the reference has them (a field with presence: null; without: its default).
 *
 * A record is first checked without side effects; whatever `check` is not sure of goes to
 * the reference decoder for that record: a truncated value or one running past its message,
 * a wire type its field does not have, a group, an int32 or bool of more than 5 bytes (a
 * negative int32), a 64-bit integer beyond 2^53 (negative ones included), a string that is not
 * UTF-8, a float that is not finite, an enum number the enum does not name, a Timestamp or
 * Duration with nanoseconds below a microsecond or beyond years 0000–9999. Types it does not
 * compile (repeated and map fields, oneofs, required fields, the wrapper types) leave the
 * whole message type to the reference.
 */

/** A message type the compiled reader leaves to the reference decoder. */
export class NotCompiled extends Error {}

/** The position after a value, or FALLBACK. */
const FALLBACK = -1;

const VARINT = 0;
const FIXED64 = 1;
const LENGTH = 2;
const FIXED32 = 5;

/** Where the last varint read ended (module state: no object per read). */
let after = 0;

const TWO_53 = 2 ** 53;

/** An unsigned varint of at most `maxBytes` bytes whose value is below 2^53, or NaN. Sets `after`. */
function varint(buf: Buffer, pos: number, end: number, maxBytes: number): number {
  // Up to 4 bytes (tags, lengths, most ints) in 32-bit integer arithmetic: a small integer V8
  // returns unboxed, where a double's sum would allocate a number per read.
  let small = 0;
  const fast = Math.min(maxBytes, 4);
  for (let i = 0; i < fast; i++) {
    if (pos >= end) return NaN;
    const b = buf[pos++]!;
    small |= (b & 0x7f) << (7 * i);
    if ((b & 0x80) === 0) {
      after = pos;
      return small;
    }
  }
  let n = small;
  let scale = 2 ** 28;
  for (let i = 4; i < maxBytes; i++) {
    if (pos >= end) return NaN;
    const b = buf[pos++]!;
    n += (b & 0x7f) * scale;
    if ((b & 0x80) === 0) {
      after = pos;
      return n < TWO_53 ? n : NaN;
    }
    scale *= 128;
  }
  return NaN;
}

/** The position after a length-delimited value (its length within `end`), else FALLBACK. Sets `after` to its start. */
function lengthPrefixed(buf: Buffer, pos: number, end: number): number {
  const n = varint(buf, pos, end, 5);
  return n === n && after + n <= end ? after + n : FALLBACK;
}

/** The position after an unknown field's value of wire type `wire`, or FALLBACK (groups included). */
function skip(buf: Buffer, pos: number, end: number, wire: number): number {
  switch (wire) {
    case VARINT:
      for (let i = 0; i < 10 && pos < end; i++) if ((buf[pos++]! & 0x80) === 0) return pos;
      return FALLBACK;
    case FIXED64:
      return pos + 8 <= end ? pos + 8 : FALLBACK;
    case LENGTH:
      return lengthPrefixed(buf, pos, end);
    case FIXED32:
      return pos + 4 <= end ? pos + 4 : FALLBACK;
    default:
      return FALLBACK;
  }
}

/** One field's value: where it is read from and how it is written. */
interface Value {
  readonly wire: number;
  /** The position after the value at `pos` (just after its tag), or FALLBACK. */
  check(buf: Buffer, pos: number, end: number): number;
  /** Appends the (checked) value at `pos`. */
  append(buf: Buffer, pos: number, builder: ColumnBuilder): void;
  /** Appends what the reference has for the field when the message does not hold it. */
  readonly absent: (builder: ColumnBuilder) => void;
}

const EMPTY = Buffer.alloc(0);

function appendSlice(builder: ColumnBuilder, buf: Buffer, start: number, end: number): void {
  (builder as VariableWidthBuilder).appendSlice(buf, start, end);
}

/** A varint field (int32, uint32, sint32, the 64-bit ones below 2^53, bool, enum). */
function varintValue(
  maxBytes: number,
  read: (raw: number) => number,
  valid: (n: number) => boolean,
  put: (builder: ColumnBuilder, n: number) => void,
  absent: (builder: ColumnBuilder) => void,
): Value {
  return {
    wire: VARINT,
    check(buf, pos, end) {
      const raw = varint(buf, pos, end, maxBytes);
      return raw === raw && valid(read(raw)) ? after : FALLBACK;
    },
    append(buf, pos, builder) {
      put(builder, read(varint(buf, pos, buf.length, maxBytes)));
    },
    absent,
  };
}

const zigzag = (raw: number) => (raw % 2 ? -(raw + 1) / 2 : raw / 2);
// A 32-bit varint of 5 bytes holds up to 35 bits: protobufjs keeps the low 32 (so do `| 0`, `>>> 0`).
const int32Of = (raw: number) => raw | 0;
const uint32Of = (raw: number) => raw >>> 0;
const sint32Of = (raw: number) => {
  const low = raw >>> 0;
  return ((low >>> 1) ^ -(low & 1)) | 0;
};
const same = (raw: number) => raw;
const always = () => true;

function fixedValue(
  wire: number,
  size: number,
  valid: (buf: Buffer, pos: number) => boolean,
  put: (builder: ColumnBuilder, buf: Buffer, pos: number) => void,
  absent: (builder: ColumnBuilder) => void,
): Value {
  return {
    wire,
    check: (buf, pos, end) => (pos + size <= end && valid(buf, pos) ? pos + size : FALLBACK),
    append: (buf, pos, builder) => put(builder, buf, pos),
    absent,
  };
}

function bytesValue(utf8: boolean): Value {
  return {
    wire: LENGTH,
    check(buf, pos, end) {
      const next = lengthPrefixed(buf, pos, end);
      if (next === FALLBACK || (utf8 && !utf8At(buf, after, next))) return FALLBACK;
      return next;
    },
    append(buf, pos, builder) {
      const next = lengthPrefixed(buf, pos, buf.length);
      appendSlice(builder, buf, after, next);
    },
    absent: (builder) => appendSlice(builder, EMPTY, 0, 0),
  };
}

function enumValue(type: protobuf.Enum, fallbackDefault: unknown): Value {
  const names = new Map<number, Buffer>();
  for (const [id, name] of Object.entries(type.valuesById)) names.set(Number(id), Buffer.from(name, 'utf8'));
  // protobufjs's default for an absent enum field is a number; the mapping names it as for any value.
  const first = typeof fallbackDefault === 'number' ? fallbackDefault : 0;
  const absentName = names.get(first) ?? Buffer.from(String(first), 'utf8');
  return varintValue(
    5,
    int32Of,
    (n) => names.has(n),
    (builder, n) => {
      const name = names.get(n)!;
      appendSlice(builder, name, 0, name.length);
    },
    (builder) => appendSlice(builder, absentName, 0, absentName.length),
  );
}

/** The largest tag protobufjs reads as it is (it reads a tag as a uint32). */
const MAX_TAG = 0xffff_ffff;

/** Seconds whose microseconds are a safe integer (years to 2255; beyond, the reference reads them). */
const MAX_SECONDS = 9_000_000_000;

/**
 * google.protobuf.Timestamp (timestamp µs) or Duration (int64 µs): seconds and nanos read from
 * the message, exactly when nanos are whole microseconds and the sum is within years 0000–9999.
 */
function microsecondsValue(timestamp: boolean): Value {
  /** The microseconds of the message at [start, end), or NaN when the reference must read it. */
  const micros = (buf: Buffer, start: number, end: number): number => {
    let seconds = 0;
    let nanos = 0;
    let pos = start;
    while (pos < end) {
      const tag = varint(buf, pos, end, 5);
      if (tag !== tag || tag > MAX_TAG) return NaN;
      pos = after;
      const wire = tag & 7;
      const number = Math.floor(tag / 8);
      if (number === 1 || number === 2) {
        if (wire !== VARINT) return NaN;
        const n = varint(buf, pos, end, number === 1 ? 8 : 5);
        if (n !== n) return NaN;
        if (number === 1) seconds = n;
        else nanos = n | 0;
        pos = after;
      } else {
        pos = skip(buf, pos, end, wire);
        if (pos === FALLBACK) return NaN;
      }
    }
    // Non-negative here (a negative int32 or int64 is a 10-byte varint), and within years 0000–9999.
    if (nanos % 1000 !== 0 || seconds > MAX_SECONDS) return NaN;
    return seconds * 1_000_000 + nanos / 1000;
  };
  return {
    wire: LENGTH,
    check(buf, pos, end) {
      const next = lengthPrefixed(buf, pos, end);
      if (next === FALLBACK) return FALLBACK;
      const us = micros(buf, after, next);
      return us === us ? next : FALLBACK;
    },
    append(buf, pos, builder) {
      const next = lengthPrefixed(buf, pos, buf.length);
      const us = micros(buf, after, next);
      if (timestamp) (builder as NumericBuilder<BigInt64Array>).append(BigInt(us));
      else (builder as FixedWidthBuilder<BigInt64Array>).appendSafeInteger(us);
    },
    absent: (builder) => builder.appendNull(),
  };
}

/** A message's fields: where each one's last value starts, then its columns in order. */
class MessageFields {
  /** By field number (small numbers) or in `byNumber`: the field's index, or undefined (skipped). */
  readonly #index: (number | undefined)[] = [];
  readonly #byNumber = new Map<number, number>();
  /** Where each field's last value starts in the message being read (-1: absent). */
  readonly #at: Int32Array;

  constructor(
    numbers: readonly number[],
    readonly values: readonly Value[],
  ) {
    numbers.forEach((n, i) => {
      if (n < 1024) this.#index[n] = i;
      else this.#byNumber.set(n, i);
    });
    this.#at = new Int32Array(values.length);
  }

  #indexOf(number: number): number | undefined {
    return number < 1024 ? this.#index[number] : this.#byNumber.get(number);
  }

  /** Whether every field of the message at [start, end) is read exactly (each value checked, in order). */
  check(buf: Buffer, start: number, end: number): boolean {
    let pos = start;
    while (pos < end) {
      const tag = varint(buf, pos, end, 5);
      // Field number 0 is no field, and protobufjs keeps a tag's low 32 bits only: the
      // reference says what it makes of either.
      if (tag !== tag || tag < 8 || tag > MAX_TAG) return false;
      pos = after;
      const wire = tag & 7;
      const i = this.#indexOf(Math.floor(tag / 8));
      if (i === undefined) pos = skip(buf, pos, end, wire);
      else {
        const value = this.values[i]!;
        pos = value.wire === wire ? value.check(buf, pos, end) : FALLBACK;
      }
      if (pos === FALLBACK) return false;
    }
    return true;
  }

  /** Appends the (checked) message at [start, end): each field's last value, in column order. */
  append(buf: Buffer, start: number, end: number, builders: readonly (ColumnBuilder | undefined)[]): void {
    const at = this.#at;
    at.fill(-1);
    let pos = start;
    while (pos < end) {
      const tag = varint(buf, pos, end, 5);
      pos = after;
      const wire = tag & 7;
      const i = this.#indexOf(Math.floor(tag / 8));
      if (i !== undefined) at[i] = pos;
      pos = skip(buf, pos, end, wire);
    }
    const values = this.values;
    for (let i = 0; i < values.length; i++) {
      const builder = builders[i];
      if (!builder) continue;
      const p = at[i]!;
      if (p < 0) values[i]!.absent(builder);
      else values[i]!.append(buf, p, builder);
    }
  }
}

function messageValue(fields: MessageFields): Value {
  return {
    wire: LENGTH,
    check(buf, pos, end) {
      const next = lengthPrefixed(buf, pos, end);
      return next !== FALLBACK && fields.check(buf, after, next) ? next : FALLBACK;
    },
    append(buf, pos, builder) {
      const next = lengthPrefixed(buf, pos, buf.length);
      const struct = builder as StructBuilder;
      fields.append(buf, after, next, struct.children);
      struct.endStruct();
    },
    absent: (builder) => builder.appendNull(),
  };
}

function hasPresence(f: protobuf.Field): boolean {
  return f.hasPresence || f.resolvedType instanceof protobuf.Type;
}

/** Whether a field is proto3's `optional` (a oneof of its own, which only gives it presence). */
function syntheticOneof(f: protobuf.Field): boolean {
  return f.partOf !== null && f.partOf.fieldsArray.length === 1 && f.options?.proto3_optional === true;
}

function compileFields(type: protobuf.Type, columns: readonly DeclaredField[]): MessageFields {
  const fields = type.fieldsArray;
  if (fields.length !== columns.length) throw new NotCompiled('fields that are not its columns');
  return new MessageFields(
    fields.map((f) => f.id),
    fields.map((f, i) => compileField(f, columns[i]!)),
  );
}

function compileField(f: protobuf.Field, column: DeclaredField): Value {
  if (f.repeated || f.map) throw new NotCompiled('a repeated or map field');
  if (f.required) throw new NotCompiled('a required field');
  if (f.partOf && !syntheticOneof(f)) throw new NotCompiled('a oneof');
  f.resolve();
  // protobufjs reads a group (or an editions DELIMITED message) as a group whatever the wire type.
  if (f.delimited) throw new NotCompiled('a group (delimited message) field');
  const present = hasPresence(f);
  const resolved = f.resolvedType;
  if (resolved instanceof protobuf.Type) {
    const name = resolved.fullName;
    if (name === '.google.protobuf.Timestamp' || name === '.google.protobuf.Duration') {
      const timestamp = name === '.google.protobuf.Timestamp';
      if (column.type !== (timestamp ? 'timestamp' : 'int64')) throw new NotCompiled('a well-known type');
      return microsecondsValue(timestamp);
    }
    if (name.startsWith('.google.protobuf.')) throw new NotCompiled(`${name.slice(1)}`);
    if (column.type !== 'struct') throw new NotCompiled('a message that is not its struct');
    return messageValue(compileFields(resolved, column.fields));
  }
  const mismatch = () =>
    new NotCompiled(`Protobuf ${f.type} mapped to ${column.type}: not a pairing the compiled reader knows`);
  // Absent: null with presence, else the type's default (protobufjs's, as the mapping reads it).
  const orNull = (absent: (builder: ColumnBuilder) => void) =>
    present ? (builder: ColumnBuilder) => builder.appendNull() : absent;
  if (resolved instanceof protobuf.Enum) {
    if (column.type !== 'string') throw mismatch();
    const value = enumValue(resolved, f.typeDefault);
    return { ...value, absent: orNull(value.absent) };
  }
  const int32 = (b: ColumnBuilder, n: number) => (b as FixedWidthBuilder<Int32Array>).append(n);
  const uint32 = (b: ColumnBuilder, n: number) => (b as NumericBuilder<Uint32Array>).append(n);
  const int64 = (b: ColumnBuilder, n: number) => (b as FixedWidthBuilder<BigInt64Array>).appendSafeInteger(n);
  const uint64 = (b: ColumnBuilder, n: number) => (b as NumericBuilder<BigUint64Array>).append(BigInt(n));
  const expect = (type: DeclaredField['type']) => {
    if (column.type !== type) throw mismatch();
  };
  switch (f.type) {
    case 'int32':
      expect('int32');
      return varintValue(
        5,
        int32Of,
        always,
        int32,
        orNull((b) => int32(b, 0)),
      );
    case 'sint32':
      expect('int32');
      return varintValue(
        5,
        sint32Of,
        always,
        int32,
        orNull((b) => int32(b, 0)),
      );
    case 'uint32':
      expect('uint32');
      return varintValue(
        5,
        uint32Of,
        always,
        uint32,
        orNull((b) => uint32(b, 0)),
      );
    case 'int64':
      expect('int64');
      return varintValue(
        8,
        same,
        always,
        int64,
        orNull((b) => int64(b, 0)),
      );
    case 'sint64':
      expect('int64');
      return varintValue(
        8,
        zigzag,
        always,
        int64,
        orNull((b) => int64(b, 0)),
      );
    case 'uint64':
      expect('uint64');
      return varintValue(
        8,
        same,
        always,
        uint64,
        orNull((b) => uint64(b, 0)),
      );
    case 'bool':
      expect('boolean');
      return varintValue(
        1,
        same,
        always,
        (b, n) => (b as BoolBuilder).append(n !== 0),
        orNull((b) => (b as BoolBuilder).append(false)),
      );
    case 'double':
      expect('float64');
      return fixedValue(
        FIXED64,
        8,
        (buf, pos) => Number.isFinite(buf.readDoubleLE(pos)),
        (b, buf, pos) => (b as FixedWidthBuilder<Float64Array>).append(buf.readDoubleLE(pos)),
        orNull((b) => (b as FixedWidthBuilder<Float64Array>).append(0)),
      );
    case 'float':
      expect('float32');
      return fixedValue(
        FIXED32,
        4,
        (buf, pos) => Number.isFinite(buf.readFloatLE(pos)),
        (b, buf, pos) => (b as NumericBuilder<Float32Array>).append(buf.readFloatLE(pos)),
        orNull((b) => (b as NumericBuilder<Float32Array>).append(0)),
      );
    case 'fixed32':
      expect('uint32');
      return fixedValue(
        FIXED32,
        4,
        always,
        (b, buf, pos) => uint32(b, buf.readUInt32LE(pos)),
        orNull((b) => uint32(b, 0)),
      );
    case 'sfixed32':
      expect('int32');
      return fixedValue(
        FIXED32,
        4,
        always,
        (b, buf, pos) => int32(b, buf.readInt32LE(pos)),
        orNull((b) => int32(b, 0)),
      );
    case 'fixed64':
      expect('uint64');
      return fixedValue(
        FIXED64,
        8,
        always,
        (b, buf, pos) => (b as NumericBuilder<BigUint64Array>).append(buf.readBigUInt64LE(pos)),
        orNull((b) => uint64(b, 0)),
      );
    case 'sfixed64':
      expect('int64');
      return fixedValue(
        FIXED64,
        8,
        always,
        (b, buf, pos) => (b as FixedWidthBuilder<BigInt64Array>).append(buf.readBigInt64LE(pos)),
        orNull((b) => int64(b, 0)),
      );
    case 'string': {
      expect('string');
      const value = bytesValue(true);
      return { ...value, absent: orNull(value.absent) };
    }
    case 'bytes': {
      expect('binary');
      const value = bytesValue(false);
      return { ...value, absent: orNull(value.absent) };
    }
    default:
      throw mismatch();
  }
}

/**
 * The compiled reader of a message type (its values framed with message-index path `path`),
 * or throws NotCompiled: its records stay with the reference decoder.
 */
export function compileProtobufReader(
  type: protobuf.Type,
  path: string,
  columns: readonly ({ readonly name: string } & DeclaredField)[],
): CompiledReader {
  const fields = compileFields(type, columns);
  type.fieldsArray.forEach((f, i) => {
    if (f.name !== columns[i]!.name) throw new NotCompiled('fields out of order');
  });
  /** Where the message of the framed value at [start, end) starts: after the header and the message-index list, which must name `path`. */
  const messageAt = (buf: Buffer, start: number, end: number): number => {
    // The list [0] (the file's first message type) is one byte 0: what most values carry.
    if (path === '0' && end > start + HEADER_BYTES && buf[start + HEADER_BYTES] === 0)
      return start + HEADER_BYTES + 1;
    const framing = messageIndexesOf(buf.subarray(start, end));
    return 'invalid' in framing || framing.indexes.join('.') !== path
      ? FALLBACK
      : start + framing.payloadOffset;
  };
  return {
    fields: columns.map((field) => ({ name: field.name, field })),
    check(buf, start, end) {
      const at = messageAt(buf, start, end);
      return at !== FALLBACK && fields.check(buf, at, end);
    },
    append(buf, start, end, builders) {
      fields.append(buf, messageAt(buf, start, end), end, builders);
    },
  };
}
