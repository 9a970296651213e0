import * as protobuf from 'protobufjs';
import type { DeclaredField } from '../../config';
import type { ColumnBuilder } from '../column-builder';
import type { CompiledReader } from '../compiled-reader';
import type { NumericBuilder } from '../declared-builders';
import type { BoolBuilder, FixedWidthBuilder } from '../fixed-width-builders';
import { HEADER_BYTES, messageIndexesOf } from '../../schema-registry/wire-format';
import { hasPresence, indexPrefixOf, messageOp } from './native-ops';
import {
  FALLBACK,
  FIXED32,
  FIXED64,
  MessageFields,
  type Value,
  always,
  bytesValue,
  enumValue,
  fixedValue,
  int32Of,
  messageValue,
  microsecondsValue,
  same,
  sint32Of,
  uint32Of,
  varintValue,
  zigzag,
} from './field-values';

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
  const prefix = indexPrefixOf(path);
  return {
    fields: columns.map((field) => ({ name: field.name, field })),
    native: prefix && { format: 'protobuf', prefix, message: messageOp(type) },
    check(buf, start, end) {
      const at = messageAt(buf, start, end);
      return at !== FALLBACK && fields.check(buf, at, end);
    },
    append(buf, start, end, builders) {
      fields.append(buf, messageAt(buf, start, end), end, builders);
    },
  };
}
