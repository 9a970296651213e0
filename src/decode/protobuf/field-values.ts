import type { ColumnBuilder } from '../column-builder';
import { utf8At } from '../utf8-bytes';
import type { NumericBuilder } from '../declared-builders';
import type { FixedWidthBuilder } from '../fixed-width-builders';
import type { StructBuilder } from '../nested-builders';
import type { VariableWidthBuilder } from '../variable-width-builders';
import type * as protobuf from 'protobufjs';
import { enumDefaultName } from './native-ops';

/**
 * The Protobuf wire read by the compiled reader (compiled-reader.ts): each field's value
 * checked without side effects, then appended to its column builder. The varint reads keep
 * where they ended in module state, so the walk over a message allocates nothing per value;
 * that state never leaves this file.
 */

/** The position after a value, or FALLBACK. */
export const FALLBACK = -1;

const VARINT = 0;
export const FIXED64 = 1;
const LENGTH = 2;
export const FIXED32 = 5;

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
export interface Value {
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
export function varintValue(
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

export const zigzag = (raw: number) => (raw % 2 ? -(raw + 1) / 2 : raw / 2);
// A 32-bit varint of 5 bytes holds up to 35 bits: protobufjs keeps the low 32 (so do `| 0`, `>>> 0`).
export const int32Of = (raw: number) => raw | 0;
export const uint32Of = (raw: number) => raw >>> 0;
export const sint32Of = (raw: number) => {
  const low = raw >>> 0;
  return ((low >>> 1) ^ -(low & 1)) | 0;
};
export const same = (raw: number) => raw;
export const always = () => true;

export function fixedValue(
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

export function bytesValue(utf8: boolean): Value {
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

export function enumValue(type: protobuf.Enum, fallbackDefault: unknown): Value {
  const names = new Map<number, Buffer>();
  for (const [id, name] of Object.entries(type.valuesById)) names.set(Number(id), Buffer.from(name, 'utf8'));
  // protobufjs's default for an absent enum field is a number; the mapping names it as for any value.
  const absentName = Buffer.from(enumDefaultName(type, fallbackDefault), 'utf8');
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
export const MAX_TAG = 0xffff_ffff;

/** Seconds whose microseconds are a safe integer (years to 2255; beyond, the reference reads them). */
const MAX_SECONDS = 9_000_000_000;

/**
 * google.protobuf.Timestamp (timestamp µs) or Duration (int64 µs): seconds and nanos read from
 * the message, exactly when nanos are whole microseconds and the sum is within years 0000–9999.
 */
export function microsecondsValue(timestamp: boolean): Value {
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
export class MessageFields {
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

export function messageValue(fields: MessageFields): Value {
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
