import { Bool, Float64, Int32, Int64, TimeUnit, Timestamp, Utf8, type DataType } from 'apache-arrow';
import type { EpochUnit, FieldTypeName } from '../config';
import {
  BoolBuilder,
  newFloat64,
  newInt32,
  newInt64,
  newTimestampMs,
  newUtf8,
  type ColumnBuilder,
  type FixedWidthBuilder,
  type VariableWidthBuilder,
} from './column-builder';
import { parseTimestamp } from './timestamp';

/**
 * Returned by a conversion that does not fit the column: the record becomes a dead
 * letter. `why` says more than "expected <type>, got <kind>" when there is more to say.
 */
export class Invalid {
  constructor(readonly why?: string) {}
}
/** A value of the wrong kind for the column. */
export const INVALID = new Invalid();
export type Converted = string | number | bigint | boolean | null;

export interface FieldCodec {
  readonly arrowType: () => DataType;
  readonly builder: () => ColumnBuilder;
  /** A JSON value → the column's value, null, or Invalid. `unit`: of numeric timestamps. */
  readonly convert: (value: unknown, unit: EpochUnit) => Converted | Invalid;
  readonly append: (builder: ColumnBuilder, value: Converted) => void;
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

const utf8: FieldCodec = {
  arrowType: () => new Utf8(),
  builder: newUtf8,
  convert: (v) => (typeof v === 'string' ? v : INVALID),
  append: (b, v) => (b as VariableWidthBuilder).appendString(v as string),
};

export const FIELD_CODECS: Readonly<Record<FieldTypeName, FieldCodec>> = {
  string: utf8,
  int32: {
    arrowType: () => new Int32(),
    builder: newInt32,
    convert: (v) =>
      Number.isInteger(v) && (v as number) >= -2147483648 && (v as number) <= 2147483647
        ? (v as number)
        : INVALID,
    append: (b, v) => (b as FixedWidthBuilder<Int32Array>).append(v as number),
  },
  int64: {
    arrowType: () => new Int64(),
    builder: newInt64,
    convert: (v) => {
      if (typeof v === 'number') return Number.isSafeInteger(v) ? BigInt(v) : INVALID;
      if (typeof v === 'string' && /^-?\d{1,19}$/.test(v)) {
        const big = BigInt(v);
        return big >= INT64_MIN && big <= INT64_MAX ? big : INVALID;
      }
      return INVALID;
    },
    append: (b, v) => (b as FixedWidthBuilder<BigInt64Array>).append(v as bigint),
  },
  float64: {
    arrowType: () => new Float64(),
    builder: newFloat64,
    convert: (v) => (typeof v === 'number' ? v : INVALID),
    append: (b, v) => (b as FixedWidthBuilder<Float64Array>).append(v as number),
  },
  boolean: {
    arrowType: () => new Bool(),
    builder: () => new BoolBuilder(),
    convert: (v) => (typeof v === 'boolean' ? v : INVALID),
    append: (b, v) => (b as BoolBuilder).append(v as boolean),
  },
  timestamp: {
    arrowType: () => new Timestamp(TimeUnit.MILLISECOND),
    builder: newTimestampMs,
    convert: (v, unit) => {
      const time = parseTimestamp(v, unit);
      return 'ms' in time ? BigInt(time.ms) : new Invalid(time.invalid);
    },
    append: (b, v) => (b as FixedWidthBuilder<BigInt64Array>).append(v as bigint),
  },
  json: {
    arrowType: () => new Utf8(),
    builder: newUtf8,
    // JSON.stringify of a pathologically deep value can overflow the stack: that is a dead letter too.
    convert: (v) => {
      try {
        return JSON.stringify(v);
      } catch {
        return INVALID;
      }
    },
    append: (b, v) => (b as VariableWidthBuilder).appendString(v as string),
  },
};

/** The column type inferred from a JSON value's kind; undefined for null (decide later). */
export function inferFieldType(v: unknown): FieldTypeName | undefined {
  switch (typeof v) {
    case 'string':
      return 'string';
    case 'number':
      return 'float64';
    case 'boolean':
      return 'boolean';
    case 'object':
      return v === null ? undefined : 'json';
    default:
      return undefined;
  }
}
