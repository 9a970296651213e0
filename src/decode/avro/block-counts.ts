import type * as avro from 'avsc';

/**
 * The bound on an Avro datum's arrays and maps, checked before avsc reads it. avsc trusts
 * a block's count: it loops that many times (and allocates an array of that length) whatever
 * the bytes left, so a corrupted count (~2^31, or a negative one, which Avro allows: its
 * absolute value is the count, and a byte size follows) has it read and allocate billions of
 * items, and a negative string or bytes length inside a block moves its position back to
 * the count, which it then reads again, forever. Either stops the partition or exhausts the
 * heap; here both are found in one pass over the bytes, no allocation per item, before avsc
 * reads anything, and the record is a dead letter instead.
 *
 * A count can claim no more items than the bytes left hold (every item of a non-empty type
 * takes at least its minimum size). Items that take no bytes at all (null, an empty record, a
 * fixed of size 0) are bounded by MAX_EMPTY_ITEMS in one value instead.
 */

/** Items of zero width (no bytes on the wire each) one value may hold, in all its arrays. */
export const MAX_EMPTY_ITEMS = 1 << 20;

/** Why the bytes are not a datum whose blocks avsc can read; undefined when they are. */
export type BlockCountCheck = (buf: Buffer, pos: number) => string | undefined;

/** The position after a value, or BAD (then `problem` says why). */
const BAD = -1;
type Skip = (buf: Buffer, pos: number, end: number) => number;

/** Module state of the one check running (checks are synchronous): no object per value. */
let problem = '';
let emptyItems = 0;
/** The value of the last `count` read, and where its varint ended. */
let after = 0;

function fail(why: string): number {
  problem = why;
  return BAD;
}

/** A varint as avsc's Tap.readLong reads it (any length, as a double); NaN when the bytes end. */
function count(buf: Buffer, pos: number, end: number): number {
  let n = 0;
  let scale = 1;
  for (;;) {
    if (pos >= end) return NaN;
    const b = buf[pos++]!;
    n += (b & 0x7f) * scale;
    if ((b & 0x80) === 0) break;
    scale *= 128;
  }
  after = pos;
  return n % 2 ? -(n + 1) / 2 : n / 2;
}

const TRUNCATED = 'the payload ends before the datum does';

function skipVarint(buf: Buffer, pos: number, end: number): number {
  while (pos < end) if ((buf[pos++]! & 0x80) === 0) return pos;
  return fail(TRUNCATED);
}

function fixed(size: number): Skip {
  return (_buf, pos, end) => (pos + size <= end ? pos + size : fail(TRUNCATED));
}

const skipLengthPrefixed: Skip = (buf, pos, end) => {
  const n = count(buf, pos, end);
  if (n !== n) return fail(TRUNCATED);
  if (n < 0) return fail(`a string or bytes of negative length ${n} (at byte ${pos})`);
  return after + n <= end ? after + n : fail(TRUNCATED);
};

/** The fewest bytes a value of the type takes on the wire (records seen on the way count 1: no cycle is infinite). */
export function minBytes(type: avro.Type, seen: Set<avro.Type> = new Set()): number {
  const under = (type as { underlyingType?: avro.Type }).underlyingType;
  if (under) return minBytes(under, seen);
  switch (type.typeName) {
    case 'null':
      return 0;
    case 'float':
      return 4;
    case 'double':
      return 8;
    case 'fixed':
      return (type as avro.types.FixedType).size;
    case 'record':
    case 'error': {
      if (seen.has(type)) return 1;
      seen.add(type);
      let sum = 0;
      for (const f of (type as avro.types.RecordType).fields) sum += minBytes(f.type, seen);
      seen.delete(type);
      return sum;
    }
    default:
      // boolean, int, long, bytes, string, enum, array, map, union: a byte at least.
      return 1;
  }
}

function blocks(itemBytes: number, item: Skip): Skip {
  return (buf, pos, end) => {
    for (;;) {
      let n = count(buf, pos, end);
      if (n !== n) return fail(TRUNCATED);
      const at = pos;
      pos = after;
      if (n === 0) return pos;
      if (n < 0) {
        n = -n;
        pos = skipVarint(buf, pos, end); // the block's byte size, which avsc skips unread
        if (pos === BAD) return BAD;
      }
      if (itemBytes > 0) {
        if (n * itemBytes > end - pos)
          return fail(
            `a block count of ${n} items (at byte ${at}) where ${end - pos} bytes are left: a corrupted count`,
          );
      } else if ((emptyItems += n) > MAX_EMPTY_ITEMS) {
        return fail(
          `more than ${MAX_EMPTY_ITEMS} items that take no bytes (a block count of ${n} at byte ${at})`,
        );
      }
      for (; n > 0; n--) {
        pos = item(buf, pos, end);
        if (pos === BAD) return BAD;
      }
    }
  };
}

function union(branches: readonly avro.Type[], compile: (t: avro.Type) => Skip): Skip {
  const skips = branches.map(compile);
  return (buf, pos, end) => {
    const i = count(buf, pos, end);
    if (i !== i) return fail(TRUNCATED);
    const skip = skips[i];
    return skip ? skip(buf, after, end) : fail(`union branch ${i} of ${skips.length} (at byte ${pos})`);
  };
}

/** Whether a value of the type can hold an array or map (else avsc's reading is bounded by its bytes). */
function hasBlocks(type: avro.Type, seen: Set<avro.Type> = new Set()): boolean {
  if (seen.has(type)) return false;
  seen.add(type);
  const t = type as {
    underlyingType?: avro.Type;
    types?: avro.Type[];
    fields?: { type: avro.Type }[];
  };
  if (type.typeName === 'array' || type.typeName === 'map') return true;
  if (t.underlyingType) return hasBlocks(t.underlyingType, seen);
  if (t.types) return t.types.some((b) => hasBlocks(b, seen));
  if (t.fields && (type.typeName === 'record' || type.typeName === 'error'))
    return t.fields.some((f) => hasBlocks(f.type, seen));
  return false;
}

/**
 * The check of a parsed writer schema's datums, or undefined when the schema has no array or
 * map (nothing in it loops on a count).
 */
export function blockCountCheck(type: avro.Type): BlockCountCheck | undefined {
  if (!hasBlocks(type)) return undefined;
  const compiled = new Map<avro.Type, Skip>();
  const compile = (t: avro.Type): Skip => {
    const done = compiled.get(t);
    if (done) return done;
    // A record may refer to itself: its skip is looked up when it runs, not when it is built.
    compiled.set(t, (buf, pos, end) => skip(buf, pos, end));
    const skip = build(t);
    return skip;
  };
  const build = (t: avro.Type): Skip => {
    const under = (t as { underlyingType?: avro.Type }).underlyingType;
    if (under) return compile(under);
    switch (t.typeName) {
      case 'null':
        return (_buf, pos) => pos;
      case 'boolean':
        return fixed(1);
      case 'float':
        return fixed(4);
      case 'double':
        return fixed(8);
      case 'fixed':
        return fixed((t as avro.types.FixedType).size);
      case 'bytes':
      case 'string':
        return skipLengthPrefixed;
      case 'record':
      case 'error': {
        const fields = (t as avro.types.RecordType).fields.map((f) => compile(f.type));
        return (buf, pos, end) => {
          for (const field of fields) {
            pos = field(buf, pos, end);
            if (pos === BAD) return BAD;
          }
          return pos;
        };
      }
      case 'array': {
        const items = (t as avro.types.ArrayType).itemsType;
        return blocks(minBytes(items), compile(items));
      }
      case 'map': {
        const values = compile((t as avro.types.MapType).valuesType as avro.Type);
        return blocks(1, (buf, pos, end) => {
          pos = skipLengthPrefixed(buf, pos, end);
          return pos === BAD ? BAD : values(buf, pos, end);
        });
      }
      case 'union:wrapped':
      case 'union:unwrapped':
        return union((t as avro.types.WrappedUnionType).types, compile);
      default:
        // int, long (avsc's or the exact one), enum: a varint.
        return skipVarint;
    }
  };
  const top = compile(type);
  return (buf, pos) => {
    emptyItems = 0;
    return top(buf, pos, buf.length) === BAD ? problem : undefined;
  };
}
