import type * as avro from 'avsc';
import type { DeclaredField } from '../../config';
import type { ColumnBuilder } from '../column-builder';
import { utf8At } from '../utf8-bytes';
import type { CompiledReader } from '../compiled-reader';
import type { BoolBuilder, FixedWidthBuilder } from '../fixed-width-builders';
import type { DecimalBuilder, NumericBuilder } from '../declared-builders';
import type { ListBuilder, StructBuilder } from '../nested-builders';
import type { VariableWidthBuilder } from '../variable-width-builders';
import { MAX_TIMESTAMP_MS, MIN_TIMESTAMP_MS } from '../timestamp';
import { HEADER_BYTES } from '../../schema-registry/wire-format';
import { minBytes } from './block-counts';
import type { AvroOp } from './native-ops';
import { MAX_DECIMAL_BYTES, unscaledOf } from './unscaled';

/**
 * A reader compiled once per writer schema that reads a datum's binary straight into the
 * column builders: no avsc object, no row, no codec conversion per record (avro-mapping.ts
 * and the codecs remain the reference). It is built by walking avsc's parsed Type (the
 * binary layout, names resolved) beside the column type avro-mapping.ts gave each field, so
 * both decoders agree on the columns by construction.
 *
 * A record is read twice: `check` walks it without side effects and says whether this reader
 * stores it exactly as the reference would; only then does `append` write it. Whatever
 * `check` is not sure of — a truncated or overlong datum, bytes after it, a union or enum
 * index out of range, a string that is not UTF-8 (avsc would replace it), an int or long whose
 * varint avsc reads another way, a float that is not finite, a timestamp or date beyond years
 * 0000–9999, a decimal beyond its precision, a map with a repeated, numeric or `__proto__` key
 * (a JavaScript object reorders or drops them) — goes to the reference decoder, which gives
 * its row or dead letter as before.
 */
export type CompiledAvroReader = CompiledReader;

/** A schema the compiled reader leaves to the reference decoder. */
export class NotCompiled extends Error {}

/** The position after a value, or FALLBACK. */
const FALLBACK = -1;

interface Node {
  /** The position after the value at `pos`, or FALLBACK when the reference must read it. */
  check(buf: Buffer, pos: number, end: number): number;
  /** Appends the (checked) value at `pos`; returns the position after it. */
  append(buf: Buffer, pos: number, builder: ColumnBuilder): number;
  /** The same reading for the native reader (native-ops.ts), where it has one. */
  readonly op?: AvroOp;
}

/** Where the last varint read ended (module state: no object per read). */
let after = 0;

const TWO_53 = 2 ** 53;

/**
 * A zig-zag varint as avsc's readLong computes it, when that is exact (fewer than 9 bytes and
 * below 2^53 before zig-zag); NaN otherwise or when the bytes end first. Sets `after`.
 */
function varint(buf: Buffer, pos: number, end: number): number {
  // Up to 4 bytes (lengths, counts, most ints) in 32-bit integer arithmetic: the result is a
  // small integer V8 returns unboxed, where a double's division would allocate a number per read.
  let small = 0;
  for (let shift = 0; shift < 28; shift += 7) {
    if (pos >= end) return NaN;
    const b = buf[pos++]!;
    small |= (b & 0x7f) << shift;
    if ((b & 0x80) === 0) {
      after = pos;
      return (small >>> 1) ^ -(small & 1);
    }
  }
  let raw = small;
  let scale = 2 ** 28;
  for (let i = 4; i < 8; i++) {
    if (pos >= end) return NaN;
    const b = buf[pos++]!;
    raw += (b & 0x7f) * scale;
    if ((b & 0x80) === 0) {
      after = pos;
      if (raw >= TWO_53) return NaN;
      return raw % 2 ? -(raw + 1) / 2 : raw / 2;
    }
    scale *= 128;
  }
  return NaN;
}

/** An int64 varint of 9 or 10 bytes (EXACT_LONG's reading), or undefined. Sets `after`. */
function bigVarint(buf: Buffer, pos: number, end: number): bigint | undefined {
  let raw = 0n;
  for (let i = 0; i < 10; i++) {
    if (pos >= end) return undefined;
    const b = buf[pos++]!;
    raw |= BigInt(b & 0x7f) << BigInt(7 * i);
    if ((b & 0x80) === 0) {
      after = pos;
      if (raw >= 1n << 64n) return undefined;
      return BigInt.asIntN(64, (raw >> 1n) ^ -(raw & 1n));
    }
  }
  return undefined;
}

/** A length or count: a non-negative exact varint, else FALLBACK. Sets `after`. */
function length(buf: Buffer, pos: number, end: number): number {
  const n = varint(buf, pos, end);
  return n >= 0 ? n : FALLBACK;
}

function appendSlice(builder: ColumnBuilder, buf: Buffer, start: number, end: number): void {
  (builder as VariableWidthBuilder).appendSlice(buf, start, end);
}

function bytesNode(utf8: boolean): Node {
  return {
    op: { kind: 'bytes', utf8 },
    check(buf, pos, end) {
      const n = length(buf, pos, end);
      if (n === FALLBACK || after + n > end) return FALLBACK;
      if (utf8 && !utf8At(buf, after, after + n)) return FALLBACK;
      return after + n;
    },
    append(buf, pos, builder) {
      const n = varint(buf, pos, buf.length);
      const start = after;
      appendSlice(builder, buf, start, start + n);
      return start + n;
    },
  };
}

/** An int or long whose value fits a safe integer, checked by `valid`, appended by `put`. */
function integerNode(
  op: AvroOp,
  valid: (n: number) => boolean,
  put: (builder: ColumnBuilder, n: number) => void,
  big?: { valid: (n: bigint) => boolean; put: (builder: ColumnBuilder, n: bigint) => void },
): Node {
  return {
    op,
    check(buf, pos, end) {
      const n = varint(buf, pos, end);
      if (n === n) return valid(n) ? after : FALLBACK;
      if (!big) return FALLBACK;
      const b = bigVarint(buf, pos, end);
      return b !== undefined && big.valid(b) ? after : FALLBACK;
    },
    append(buf, pos, builder) {
      const n = varint(buf, pos, buf.length);
      if (n === n) put(builder, n);
      else big!.put(builder, bigVarint(buf, pos, buf.length)!);
      return after;
    },
  };
}

const INT32 = (n: number) => n >= -2147483648 && n <= 2147483647;

function fixedNode(
  op: AvroOp,
  size: number,
  put: (builder: ColumnBuilder, buf: Buffer, pos: number) => void,
): Node {
  return {
    op,
    check: (_buf, pos, end) => (pos + size <= end ? pos + size : FALLBACK),
    append(buf, pos, builder) {
      put(builder, buf, pos);
      return pos + size;
    },
  };
}

function decimalNode(precision: number, size: number | undefined): Node {
  const limit = 10n ** BigInt(precision);
  const fits = (n: bigint) => n < limit && n > -limit;
  return {
    check(buf, pos, end) {
      let start: number;
      let stop: number;
      if (size !== undefined) {
        start = pos;
        stop = pos + size;
      } else {
        const n = length(buf, pos, end);
        if (n === FALLBACK) return FALLBACK;
        start = after;
        stop = after + n;
      }
      // Beyond 16 bytes a value of precision ≤ 38 is a sign extension; leave those to the reference.
      if (stop > end || stop - start > MAX_DECIMAL_BYTES) return FALLBACK;
      return fits(unscaledOf(buf, start, stop)) ? stop : FALLBACK;
    },
    append(buf, pos, builder) {
      let start = pos;
      let stop = pos + (size ?? 0);
      if (size === undefined) {
        const n = varint(buf, pos, buf.length);
        start = after;
        stop = after + n;
      }
      (builder as DecimalBuilder).append(unscaledOf(buf, start, stop));
      return stop;
    },
  };
}

function enumNode(symbols: readonly string[]): Node {
  const bytes = symbols.map((s) => Buffer.from(s, 'utf8'));
  return {
    op: { kind: 'enum', symbols },
    check(buf, pos, end) {
      const i = varint(buf, pos, end);
      return i >= 0 && i < symbols.length ? after : FALLBACK;
    },
    append(buf, pos, builder) {
      const symbol = bytes[varint(buf, pos, buf.length)]!;
      appendSlice(builder, symbol, 0, symbol.length);
      return after;
    },
  };
}

function recordNode(children: readonly Node[]): Node {
  const ops = children.flatMap((c) => (c.op ? [c.op] : []));
  return {
    op: ops.length === children.length ? { kind: 'record', children: ops } : undefined,
    check(buf, pos, end) {
      for (const child of children) {
        pos = child.check(buf, pos, end);
        if (pos === FALLBACK) return FALLBACK;
      }
      return pos;
    },
    append(buf, pos, builder) {
      const struct = builder as StructBuilder;
      for (let i = 0; i < children.length; i++) pos = children[i]!.append(buf, pos, struct.children[i]!);
      struct.endStruct();
      return pos;
    },
  };
}

/**
 * The items of an array or map's blocks: a count, then (when negative) a byte size, then the
 * items (avsc's readArraySize).
 */
function blocks(
  buf: Buffer,
  pos: number,
  end: number,
  item: (buf: Buffer, pos: number, end: number) => number,
): number {
  for (;;) {
    let n = varint(buf, pos, end);
    if (n !== n) return FALLBACK;
    pos = after;
    if (n === 0) return pos;
    if (n < 0) {
      n = -n;
      if (varint(buf, pos, end) !== varint(buf, pos, end)) return FALLBACK;
      pos = after;
    }
    // Items take at least a byte here (arrays of empty items are not compiled), so a larger
    // count is malformed: the reference path refuses it (block-counts.ts) without reading it.
    if (n > end - pos) return FALLBACK;
    for (; n > 0; n--) {
      pos = item(buf, pos, end);
      if (pos === FALLBACK) return FALLBACK;
    }
  }
}

function arrayNode(items: Node): Node {
  return {
    check: (buf, pos, end) => blocks(buf, pos, end, (b, p, e) => items.check(b, p, e)),
    append(buf, pos, builder) {
      const list = builder as ListBuilder;
      pos = blocks(buf, pos, buf.length, (b, p) => items.append(b, p, list.child));
      list.endList();
      return pos;
    },
  };
}

const PROTO = Buffer.from('__proto__');

/**
 * Whether a map key (valid UTF-8 at [start, end)) keeps its place and value in the JavaScript
 * object avsc reads a map into: not an array index (those go first, in numeric order; any key
 * starting with a digit is left to the reference), not `__proto__`, and not a repeat of an
 * earlier key of the map (`keySpans[0, count)`, compared by bytes).
 */
function plainKey(
  buf: Buffer,
  start: number,
  end: number,
  keySpans: readonly number[],
  count: number,
): boolean {
  const n = end - start;
  if (n > 0 && buf[start]! >= 0x30 && buf[start]! <= 0x39) return false;
  if (n === PROTO.length && buf.compare(PROTO, 0, n, start, end) === 0) return false;
  for (let k = 0; k < count; k += 2) {
    const s = keySpans[k]!;
    if (keySpans[k + 1]! - s === n && buf.compare(buf, s, s + n, start, end) === 0) return false;
  }
  return true;
}

const KEY = bytesNode(true);

function mapNode(values: Node): Node {
  /** Each key's [start, end) in the map being checked, reused (a node is never inside itself). */
  const keySpans: number[] = [];
  return {
    check(buf, pos, end) {
      let count = 0;
      return blocks(buf, pos, end, (b, p, e) => {
        const next = KEY.check(b, p, e);
        // KEY.check left `after` at the key's first byte. Past 64 keys the quadratic check stops.
        if (next === FALLBACK || count >= 128 || !plainKey(b, after, next, keySpans, count)) return FALLBACK;
        keySpans[count++] = after;
        keySpans[count++] = next;
        return values.check(b, next, e);
      });
    },
    append(buf, pos, builder) {
      const list = builder as ListBuilder;
      const entry = list.child as StructBuilder;
      const [keyColumn, valueColumn] = entry.children as [ColumnBuilder, ColumnBuilder];
      pos = blocks(buf, pos, buf.length, (b, p) => {
        const next = values.append(b, KEY.append(b, p, keyColumn), valueColumn);
        entry.endStruct();
        return next;
      });
      list.endList();
      return pos;
    },
  };
}

/** A union of null and one type (either order), or of one type alone (`nullIndex` -1: no index reads as null). */
function optionalNode(nullIndex: number, valueIndex: number, inner: Node): Node {
  return {
    op: inner.op && { kind: 'optional', nullIndex, valueIndex, inner: inner.op },
    check(buf, pos, end) {
      const i = varint(buf, pos, end);
      if (i === nullIndex && i >= 0) return after;
      return i === valueIndex ? inner.check(buf, after, end) : FALLBACK;
    },
    append(buf, pos, builder) {
      const i = varint(buf, pos, buf.length);
      if (i === nullIndex) {
        builder.appendNull();
        return after;
      }
      return inner.append(buf, after, builder);
    },
  };
}

const MS_PER_DAY_RANGE = { min: -719_528, max: 2_932_896 };

function scalarNode(type: avro.Type, field: DeclaredField): Node {
  const name = type.typeName;
  const mismatch = () =>
    new NotCompiled(`Avro ${name} mapped to ${field.type}: not a pairing the compiled reader knows`);
  switch (field.type) {
    case 'boolean':
      if (name !== 'boolean') throw mismatch();
      return {
        op: { kind: 'bool' },
        check: (_buf, pos, end) => (pos < end ? pos + 1 : FALLBACK),
        append(buf, pos, builder) {
          (builder as BoolBuilder).append(buf[pos] !== 0);
          return pos + 1;
        },
      };
    case 'int32':
      if (name !== 'int') throw mismatch();
      return integerNode({ kind: 'int', min: -2147483648, max: 2147483647 }, INT32, (b, n) =>
        (b as FixedWidthBuilder<Int32Array>).append(n),
      );
    case 'date':
      if (name !== 'int') throw mismatch();
      return integerNode(
        { kind: 'int', ...MS_PER_DAY_RANGE },
        (n) => n >= MS_PER_DAY_RANGE.min && n <= MS_PER_DAY_RANGE.max,
        (b, n) => (b as NumericBuilder<Int32Array>).append(n),
      );
    case 'int64':
      if (name !== 'abstract:long' && name !== 'long') throw mismatch();
      // A long is EXACT_LONG (every int64; writer-schemas.ts turns the object form into the name),
      // whose type name is 'abstract:long'; avsc's own 'long' refuses or rounds beyond 2^53.
      return integerNode(
        { kind: 'long', big: name === 'abstract:long', min: -Infinity, max: Infinity },
        () => true,
        (b, n) => (b as FixedWidthBuilder<BigInt64Array>).appendSafeInteger(n),
        name === 'abstract:long'
          ? { valid: () => true, put: (b, n) => (b as FixedWidthBuilder<BigInt64Array>).append(n) }
          : undefined,
      );
    case 'timestamp': {
      if (name !== 'abstract:long' && name !== 'long') throw mismatch();
      // The mapping stores epoch numbers in their own unit: the value unchanged within years 0000–9999.
      const per = field.unit === 'us' ? 1000 : field.unit === 'ms' || field.unit === undefined ? 1 : 0;
      if (per === 0 || (field.epochUnit ?? field.unit ?? 'ms') !== (field.unit ?? 'ms')) throw mismatch();
      const min = MIN_TIMESTAMP_MS * per;
      const max = MAX_TIMESTAMP_MS * per;
      return integerNode(
        { kind: 'long', big: false, min, max },
        (n) => n >= min && n <= max,
        (b, n) => (b as NumericBuilder<BigInt64Array>).append(BigInt(n)),
      );
    }
    case 'float32':
      if (name !== 'float') throw mismatch();
      return {
        op: { kind: 'float32' },
        check: (buf, pos, end) =>
          pos + 4 <= end && Number.isFinite(buf.readFloatLE(pos)) ? pos + 4 : FALLBACK,
        append(buf, pos, builder) {
          (builder as NumericBuilder<Float32Array>).append(buf.readFloatLE(pos));
          return pos + 4;
        },
      };
    case 'float64':
      if (name !== 'double') throw mismatch();
      return fixedNode({ kind: 'float64' }, 8, (b, buf, pos) =>
        (b as FixedWidthBuilder<Float64Array>).append(buf.readDoubleLE(pos)),
      );
    case 'string':
      if (name === 'string') return bytesNode(true);
      if (name === 'enum') return enumNode((type as avro.types.EnumType).symbols);
      throw mismatch();
    case 'binary':
      if (name === 'bytes') return bytesNode(false);
      if (name === 'fixed') {
        const size = (type as avro.types.FixedType).size;
        return fixedNode({ kind: 'fixed', size }, size, (b, buf, pos) =>
          appendSlice(b, buf, pos, pos + size),
        );
      }
      throw mismatch();
    case 'decimal':
      if (name === 'bytes') return decimalNode(field.precision, undefined);
      if (name === 'fixed') return decimalNode(field.precision, (type as avro.types.FixedType).size);
      throw mismatch();
    default:
      throw mismatch();
  }
}

function compileNode(type: avro.Type, field: DeclaredField): Node {
  switch (type.typeName) {
    case 'union:wrapped': {
      const branches = (type as avro.types.WrappedUnionType).types;
      const nullIndex = branches.findIndex((b) => b.typeName === 'null');
      const others = branches.flatMap((b, i) => (b.typeName === 'null' ? [] : [i]));
      if (others.length !== 1 || branches.length > 2)
        throw new NotCompiled('a union of several types (a struct of branches)');
      const inner = compileNode(branches[others[0]!]!, { ...field, nullable: false });
      return optionalNode(nullIndex, others[0]!, inner);
    }
    case 'record':
    case 'error': {
      const fields = (type as avro.types.RecordType).fields;
      if (field.type !== 'struct' || field.fields.length !== fields.length)
        throw new NotCompiled('a record that is not its struct');
      return recordNode(fields.map((f, i) => compileNode(f.type, field.fields[i]!)));
    }
    case 'array':
      if (field.type !== 'list') throw new NotCompiled('an array that is not a list');
      // Items of no bytes are bounded by a count of them, not by the bytes left (block-counts.ts).
      if (minBytes((type as avro.types.ArrayType).itemsType) === 0)
        throw new NotCompiled('an array of items that take no bytes');
      return arrayNode(compileNode((type as avro.types.ArrayType).itemsType, field.items));
    case 'map': {
      const entry = field.type === 'list' ? field.items : undefined;
      if (entry?.type !== 'struct' || entry.fields.length !== 2)
        throw new NotCompiled('a map that is not a list of entries');
      return mapNode(compileNode((type as avro.types.MapType).valuesType as avro.Type, entry.fields[1]!));
    }
    default:
      return scalarNode(type, field);
  }
}

/**
 * The compiled reader of a writer schema whose top level is a record (one column per field),
 * or throws NotCompiled: its records stay with the reference decoder.
 */
export function compileAvroReader(
  type: avro.Type,
  fields: readonly ({ readonly name: string } & DeclaredField)[],
): CompiledAvroReader {
  const record = type.typeName === 'record' ? (type as avro.types.RecordType) : undefined;
  if (!record || record.fields.length !== fields.length)
    throw new NotCompiled('only a top-level record is compiled');
  const nodes = record.fields.map((f, i) => {
    if (f.name !== fields[i]!.name) throw new NotCompiled('fields out of order');
    return compileNode(f.type, fields[i]!);
  });
  const ops = nodes.flatMap((n) => (n.op ? [n.op] : []));
  return {
    fields: fields.map((field) => ({ name: field.name, field })),
    native: ops.length === nodes.length ? { format: 'avro', fields: ops } : undefined,
    check(buf, start, end) {
      let pos = start + HEADER_BYTES;
      for (const node of nodes) {
        pos = node.check(buf, pos, end);
        if (pos === FALLBACK) return false;
      }
      return pos === end;
    },
    append(buf, start, end, builders) {
      let pos = start + HEADER_BYTES;
      for (let i = 0; i < nodes.length; i++) {
        const builder = builders[i];
        pos = builder ? nodes[i]!.append(buf, pos, builder) : nodes[i]!.check(buf, pos, end);
      }
    },
  };
}
