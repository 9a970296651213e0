import { Bool, Float64, Int32, Int64, TimeUnit, Timestamp, Utf8, type DataType } from 'apache-arrow';
import { errorMessage } from '../common/errors';
import type { EpochUnit } from '../config';
import type { ColumnBuilder } from './column-builder';
import {
  BoolBuilder,
  newFloat64,
  newInt32,
  newInt64,
  newTimestampMs,
  newUtf8,
  type FixedWidthBuilder,
} from './fixed-width-builders';
import type { VariableWidthBuilder } from './variable-width-builders';
import { isWellFormed } from '../config/column-name';
import { stringifyJsonExact } from './exact-json';
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
/**
 * A value ready for its column. The seven inferred types use the scalars; declared types
 * add bytes (binary), typed arrays (vectors) and arrays (a list's items, a struct's
 * fields in declaration order; the codec knows which).
 */
export type Converted =
  string | number | bigint | boolean | null | Uint8Array | Float32Array | Uint16Array | readonly Converted[];

/** The types inference produces (and seeds from a table); every other type is declared only. */
export type InferredTypeName = 'string' | 'int32' | 'int64' | 'float64' | 'boolean' | 'timestamp' | 'json';

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
  convert: (v) => {
    if (typeof v !== 'string') return INVALID;
    return isWellFormed(v)
      ? v
      : new Invalid('the string holds a lone UTF-16 surrogate, which UTF-8 cannot store');
  },
  append: (b, v) => (b as VariableWidthBuilder).appendString(v as string),
};

export const FIELD_CODECS: Readonly<Record<InferredTypeName, FieldCodec>> = {
  string: utf8,
  int32: {
    arrowType: () => new Int32(),
    builder: newInt32,
    convert: (v) => {
      if (typeof v !== 'number' && typeof v !== 'bigint') return INVALID;
      return typeof v === 'number' && Number.isInteger(v) && v >= -2147483648 && v <= 2147483647
        ? v
        : new Invalid(`${v} is not an int32`);
    },
    append: (b, v) => (b as FixedWidthBuilder<Int32Array>).append(v as number),
  },
  int64: {
    arrowType: () => new Int64(),
    builder: newInt64,
    convert: (v) => {
      // Integer literals beyond 2^53 arrive as BigInt (exact-json.ts); a number that is not a
      // safe integer is a float in the text (1e19, 1.5) and may already be rounded.
      if (typeof v === 'number')
        return Number.isSafeInteger(v) ? BigInt(v) : new Invalid(`${v} is not an exact integer`);
      const big =
        typeof v === 'bigint' ? v : typeof v === 'string' && /^-?\d{1,20}$/.test(v) ? BigInt(v) : undefined;
      if (big === undefined) return INVALID;
      return big >= INT64_MIN && big <= INT64_MAX ? big : new Invalid(`${big} is outside int64`);
    },
    append: (b, v) => (b as FixedWidthBuilder<BigInt64Array>).append(v as bigint),
  },
  float64: {
    arrowType: () => new Float64(),
    builder: newFloat64,
    convert: (v) => {
      if (typeof v === 'number') return v;
      if (typeof v !== 'bigint') return INVALID;
      // An integer literal beyond 2^53: kept when the double is exactly that integer, or when
      // the literal is how that double prints (JavaScript writes the double 67482704808384808
      // as 67482704808384810): the sender's value was that double, nothing is lost.
      const n = Number(v);
      return Number.isFinite(n) && (BigInt(n) === v || String(n) === v.toString())
        ? n
        : new Invalid(
            `the integer ${v} has no exact float64 (declare the field int64, or send it as a string)`,
          );
    },
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
    // Stringifying a pathologically deep (or, from a transform, cyclic) value throws: a dead letter too.
    convert: (v) => {
      try {
        return stringifyJsonExact(v) ?? new Invalid(`a ${typeof v} is not JSON`);
      } catch (error) {
        return new Invalid(`not writable as JSON: ${errorMessage(error)}`);
      }
    },
    append: (b, v) => (b as VariableWidthBuilder).appendString(v as string),
  },
};

/** The column type inferred from a JSON value's kind; undefined for null (decide later). */
export function inferFieldType(v: unknown): InferredTypeName | undefined {
  switch (typeof v) {
    case 'string':
      return 'string';
    case 'number':
    case 'bigint': // an integer literal beyond 2^53: still a JSON number
      return 'float64';
    case 'boolean':
      return 'boolean';
    case 'object':
      return v === null ? undefined : 'json';
    default:
      return undefined;
  }
}
