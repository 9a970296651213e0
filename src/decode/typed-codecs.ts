import {
  Binary,
  DateDay,
  Field,
  Float32,
  Int16,
  Int8,
  LargeBinary,
  LargeUtf8,
  List,
  Struct,
  TimeUnit,
  Timestamp,
  Uint16,
  Uint32,
  Uint64,
  Uint8,
  type DataType,
} from 'apache-arrow';
import type { DeclaredField, DeclaredType, EpochUnit, FieldTypeName, NamedField } from '../config';
import type { ColumnBuilder } from './column-builder';
import { NumericBuilder } from './declared-builders';
import { newBinary } from './fixed-width-builders';
import { ListBuilder, StructBuilder } from './nested-builders';
import { LargeVariableWidthBuilder, type VariableWidthBuilder } from './variable-width-builders';
import { FIELD_CODECS, INVALID, Invalid, type Converted, type FieldCodec } from './field-codec';
import { parseDate, parseTimestampIn } from './timestamp';
import { fromBase64 } from './base64';
import { decimalCodec } from './decimal-codec';
import { vectorCodec } from './vector-codec';

/**
 * The codec of a declared column type: the Arrow type, its builder, and the JSON value
 * → column value conversion. The seven inferred types (and `timestamp` stored in ms
 * without a zone) get the hand-tuned codecs of field-codec.ts, unchanged; the others
 * are built here once per field and reused for every record.
 *
 * What each accepts (a value of another kind is a dead letter naming the field):
 * - int8, int16, uint8, uint16, uint32: integer numbers in range (no rounding, no strings).
 * - uint64: integer numbers, big integers and decimal digit strings in 0…2^64-1.
 * - float32: numbers, rounded to the nearest float32; beyond its range is refused.
 * - date: `YYYY-MM-DD`, or an integer count of days since 1970-01-01.
 * - timestamp with `unit`/`timezone`: as the ms timestamp (RFC 3339 strings, epoch
 *   numbers in the field's `epochUnit`, else its `unit`), kept down to `unit`.
 * - binary, large_binary: standard base64 (padded) in JSON; bytes as they are from a
 *   transform (`format: raw` gives it the record's bytes).
 * - large_string: like string.
 * - decimal(p, s): decimal strings (`"-12.50"`, `"1e3"`) and numbers (read through their
 *   shortest decimal form, which is the literal for up to 15 significant digits); more
 *   fractional digits than `s` (other than zeros) or more than `p` digits is refused.
 * - vector: a JSON array of exactly `dim` numbers, or base64 of `dim` little-endian
 *   elements (4 bytes for float32, 2 for float16, 1 for uint8); NaN and ±Infinity
 *   (possible in base64) are refused, as is a wrong length, naming both dimensions.
 * - list<T>: a JSON array, each item converted as T (null items when T is nullable).
 * - struct<{...}>: a JSON object; absent or null fields are null (a dead letter when
 *   not nullable); keys not declared are ignored, like a declared schema's top level.
 */
export function codecOf(type: DeclaredType, consumerUnit: EpochUnit): FieldCodec {
  switch (type.type) {
    case 'timestamp': {
      const unit = type.unit ?? 'ms';
      const numbers = numbersUnit(type, consumerUnit);
      if (unit === 'ms' && type.timezone === undefined) {
        // The inferred-types codec, whose unit argument is the field's epochUnit (record-decoder).
        return FIELD_CODECS.timestamp;
      }
      const arrow = new Timestamp(TIME_UNITS[unit], type.timezone ?? null);
      return numeric(
        arrow,
        (n) => new BigInt64Array(n),
        (v) => {
          const time = parseTimestampIn(v, numbers, unit);
          return 'value' in time ? time.value : new Invalid(time.invalid);
        },
      );
    }
    case 'vector':
      return vectorCodec(type.dim, type.element);
    case 'decimal':
      return decimalCodec(type.precision, type.scale);
    case 'list':
      return listCodec(type.items, consumerUnit);
    case 'struct':
      return structCodec(type.fields, consumerUnit);
    default:
      return SCALAR_CODECS[type.type];
  }
}

/** The unit of a field's epoch numbers: its own `epochUnit`, else its stored `unit`, else the consumer's. */
export function numbersUnit(type: DeclaredType, consumerUnit: EpochUnit): EpochUnit {
  return type.type === 'timestamp' ? (type.epochUnit ?? type.unit ?? consumerUnit) : consumerUnit;
}

/** A type as messages and the README name it: `vector<float32>[768]`, `list<int32>`, `decimal(10, 2)`. */
export function typeLabel(type: DeclaredType): string {
  switch (type.type) {
    case 'timestamp': {
      const parts = [type.unit, type.timezone].filter((p) => p !== undefined);
      return parts.length === 0 ? 'timestamp' : `timestamp(${parts.join(', ')})`;
    }
    case 'vector':
      return `vector<${type.element}>[${type.dim}]`;
    case 'decimal':
      return `decimal(${type.precision}, ${type.scale})`;
    case 'list':
      return `list<${typeLabel(type.items)}>`;
    case 'struct':
      return `struct<{${type.fields.map((f) => `${f.name}: ${typeLabel(f)}`).join(', ')}}>`;
    default:
      return type.type;
  }
}

/** The Arrow field of a declared column (for the schema check at start and the README). */
export function arrowFieldOf(name: string, field: DeclaredField, consumerUnit: EpochUnit): Field {
  return new Field(name, codecOf(field, consumerUnit).arrowType(), field.nullable);
}

const TIME_UNITS: Readonly<Record<EpochUnit, TimeUnit>> = {
  s: TimeUnit.SECOND,
  ms: TimeUnit.MILLISECOND,
  us: TimeUnit.MICROSECOND,
  ns: TimeUnit.NANOSECOND,
};

type NumericArrayOf = Int8Array | Int16Array | Int32Array | Uint8Array | Uint16Array | Uint32Array;

function numeric(
  arrowType: DataType,
  create: (n: number) => NumericArrayOf | Float32Array | BigInt64Array | BigUint64Array,
  convert: (v: unknown) => Converted | Invalid,
): FieldCodec {
  return {
    arrowType: () => arrowType,
    builder: () => new NumericBuilder(arrowType, create),
    convert,
    append: (b, v) => (b as NumericBuilder<BigInt64Array>).append(v as number | bigint),
  };
}

function integer(
  name: string,
  arrowType: DataType,
  create: (n: number) => NumericArrayOf,
  min: number,
  max: number,
) {
  return numeric(arrowType, create, (v) => {
    if (typeof v === 'bigint') return new Invalid(`${v} is outside ${name}`);
    if (typeof v !== 'number') return INVALID;
    if (!Number.isInteger(v)) return new Invalid(`${v} is not an integer`);
    return v >= min && v <= max ? v : new Invalid(`${v} is outside ${name} (${min} to ${max})`);
  });
}

const UINT64_MAX = 2n ** 64n - 1n;
function bytesOf(v: unknown): Uint8Array | Invalid {
  if (typeof v === 'string') return fromBase64(v);
  return v instanceof Uint8Array ? v : INVALID;
}

function variableWidth(
  arrowType: DataType,
  builder: () => ColumnBuilder,
  kind: 'string' | 'bytes',
): FieldCodec {
  return kind === 'string'
    ? {
        arrowType: () => arrowType,
        builder,
        convert: FIELD_CODECS.string.convert,
        append: (b, v) => (b as VariableWidthBuilder).appendString(v as string),
      }
    : {
        arrowType: () => arrowType,
        builder,
        convert: bytesOf,
        append: (b, v) => (b as VariableWidthBuilder).appendBytes(v as Uint8Array),
      };
}

const SCALAR_CODECS: Readonly<Record<Exclude<FieldTypeName, 'timestamp'>, FieldCodec>> = {
  string: FIELD_CODECS.string,
  int32: FIELD_CODECS.int32,
  int64: FIELD_CODECS.int64,
  float64: FIELD_CODECS.float64,
  boolean: FIELD_CODECS.boolean,
  json: FIELD_CODECS.json,
  int8: integer('int8', new Int8(), (n) => new Int8Array(n), -128, 127),
  int16: integer('int16', new Int16(), (n) => new Int16Array(n), -32768, 32767),
  uint8: integer('uint8', new Uint8(), (n) => new Uint8Array(n), 0, 255),
  uint16: integer('uint16', new Uint16(), (n) => new Uint16Array(n), 0, 65535),
  uint32: integer('uint32', new Uint32(), (n) => new Uint32Array(n), 0, 4294967295),
  uint64: numeric(
    new Uint64(),
    (n) => new BigUint64Array(n),
    (v) => {
      if (typeof v === 'number' && !Number.isSafeInteger(v))
        return new Invalid(`${v} is not an exact integer`);
      const big =
        typeof v === 'number' || typeof v === 'bigint'
          ? BigInt(v)
          : typeof v === 'string' && /^\d{1,20}$/.test(v)
            ? BigInt(v)
            : undefined;
      if (big === undefined) return INVALID;
      return big >= 0n && big <= UINT64_MAX ? big : new Invalid(`${big} is outside uint64`);
    },
  ),
  float32: numeric(
    new Float32(),
    (n) => new Float32Array(n),
    (v) => {
      if (typeof v !== 'number' && typeof v !== 'bigint') return INVALID;
      const f = Math.fround(Number(v));
      return Number.isFinite(f) ? f : new Invalid(`${v} is outside float32`);
    },
  ),
  date: numeric(
    new DateDay(),
    (n) => new Int32Array(n),
    (v) => {
      const date = parseDate(v);
      return 'days' in date ? date.days : new Invalid(date.invalid);
    },
  ),
  binary: variableWidth(new Binary(), newBinary, 'bytes'),
  large_string: variableWidth(
    new LargeUtf8(),
    () => new LargeVariableWidthBuilder(new LargeUtf8()),
    'string',
  ),
  large_binary: variableWidth(
    new LargeBinary(),
    () => new LargeVariableWidthBuilder(new LargeBinary()),
    'bytes',
  ),
};

function kindOf(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value === 'bigint' ? 'number' : typeof value;
}

/** A nested value's problem, with where it is: `item 3: …`, `"name": …`. */
function nested(where: string, field: DeclaredField, value: unknown, invalid: Invalid): Invalid {
  return new Invalid(
    `${where}: ${invalid.why ?? `expected ${typeLabel(field)}${field.nullable ? '' : ' (required)'}, got ${kindOf(value)}`}`,
  );
}

function listCodec(items: DeclaredField, consumerUnit: EpochUnit): FieldCodec {
  const item = codecOf(items, consumerUnit);
  const numbers = numbersUnit(items, consumerUnit);
  const arrowType = new List(new Field('item', item.arrowType(), items.nullable));
  return {
    arrowType: () => arrowType,
    builder: () => new ListBuilder(arrowType, item.builder()),
    convert: (v) => {
      if (!Array.isArray(v)) return INVALID;
      const out: Converted[] = new Array<Converted>(v.length);
      for (let i = 0; i < v.length; i++) {
        const x: unknown = v[i];
        if (x === null || x === undefined) {
          if (!items.nullable) return nested(`item ${i}`, items, x, INVALID);
          out[i] = null;
          continue;
        }
        const c = item.convert(x, numbers);
        if (c instanceof Invalid) return nested(`item ${i}`, items, x, c);
        out[i] = c;
      }
      return out;
    },
    append: (b, v) => {
      const list = b as ListBuilder;
      for (const x of v as readonly Converted[]) {
        if (x === null) list.child.appendNull();
        else item.append(list.child, x);
      }
      list.endList();
    },
  };
}

function structCodec(named: readonly NamedField[], consumerUnit: EpochUnit): FieldCodec {
  const codecs = named.map((f) => codecOf(f, consumerUnit));
  const units = named.map((f) => numbersUnit(f, consumerUnit));
  const arrowType = new Struct(named.map((f, i) => new Field(f.name, codecs[i]!.arrowType(), f.nullable)));
  return {
    arrowType: () => arrowType,
    builder: () =>
      new StructBuilder(
        arrowType,
        codecs.map((c) => c.builder()),
      ),
    convert: (v) => {
      if (v === null || typeof v !== 'object' || Array.isArray(v) || v instanceof Uint8Array) return INVALID;
      const record = v as Record<string, unknown>;
      const out: Converted[] = new Array<Converted>(named.length);
      for (let i = 0; i < named.length; i++) {
        const f = named[i]!;
        const x = Object.hasOwn(record, f.name) ? record[f.name] : undefined;
        if (x === null || x === undefined) {
          if (!f.nullable) return nested(JSON.stringify(f.name), f, x, INVALID);
          out[i] = null;
          continue;
        }
        const c = codecs[i]!.convert(x, units[i]!);
        if (c instanceof Invalid) return nested(JSON.stringify(f.name), f, x, c);
        out[i] = c;
      }
      return out;
    },
    append: (b, v) => {
      const struct = b as StructBuilder;
      const values = v as readonly Converted[];
      for (let i = 0; i < codecs.length; i++) {
        const x = values[i]!;
        if (x === null) struct.children[i]!.appendNull();
        else codecs[i]!.append(struct.children[i]!, x);
      }
      struct.endStruct();
    },
  };
}
