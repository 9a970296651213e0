import type { Data, DataType } from 'apache-arrow';

/**
 * Column builders that write straight into typed arrays and one value buffer per
 * string column, wrapped zero-copy with `makeData`. apache-arrow's generic builders
 * cost ~4× the JSON parse itself (profiled on the log records of bench/); these stay
 * near the parse.
 */
export interface ColumnBuilder {
  readonly length: number;
  appendNull(): void;
  finish(): Data;
  /**
   * Room for `rows` rows (and `valueBytes` bytes of values, for variable-width columns), taken
   * at once before the first append, where growing by doubling from 64 rows would allocate
   * and copy each buffer about ten times per batch. Builders without it grow as they go.
   */
  reserve?(rows: number, valueBytes: number): void;
  /** The bytes of values appended so far (variable-width columns): the next batch's hint. */
  readonly valueBytes?: number;
}

export class Validity {
  bits = new Uint8Array(64);
  nullCount = 0;

  reserve(rows: number): void {
    const bytes = (rows + 7) >> 3;
    if (bytes > this.bits.length) this.bits = grow(this.bits, bytes);
  }

  set(index: number, valid: boolean): void {
    const byte = index >> 3;
    if (byte >= this.bits.length) this.bits = grow(this.bits, byte + 1);
    if (valid) this.bits[byte]! |= 1 << (index & 7);
    else this.nullCount += 1;
  }

  bitmap(length: number): Uint8Array {
    return this.bits.subarray(0, (length + 7) >> 3);
  }

  /** What every column's makeData takes from its type, length and validity. */
  header<T extends DataType>(
    type: T,
    length: number,
  ): { type: T; length: number; nullCount: number; nullBitmap: Uint8Array } {
    return { type, length, nullCount: this.nullCount, nullBitmap: this.bitmap(length) };
  }
}

export function grow<T extends Uint8Array | Int32Array | Float64Array | BigInt64Array>(
  array: T,
  minLength: number,
): T {
  let length = Math.max(64, array.length);
  while (length < minLength) length *= 2;
  const next = new (array.constructor as new (n: number) => T)(length);
  next.set(array as never);
  return next;
}

export type NumericArray =
  | Int8Array
  | Int16Array
  | Int32Array
  | Uint8Array
  | Uint16Array
  | Uint32Array
  | Float32Array
  | BigInt64Array
  | BigUint64Array;

export function growAny<T extends NumericArray>(array: T, minLength: number): T {
  let length = Math.max(64, array.length);
  while (length < minLength) length *= 2;
  const next = new (array.constructor as new (n: number) => T)(length);
  next.set(array as never);
  return next;
}

/** Slices up to this many bytes are copied in a loop; longer ones by Buffer.copy (its fixed cost amortized). */
const SHORT_SLICE = 32;

/**
 * The value buffer of a variable-width column: values back to back, grown by doubling.
 * Strings go in with Buffer's write(), which puts the UTF-8 in place; TextEncoder's
 * encodeInto needed a subarray object per string (bench/hot-path-levers.md).
 */
export class ValueBytes {
  #bytes = new Uint8Array(1024);
  /** `#bytes` as a Buffer, for write(). */
  #writer = Buffer.from(this.#bytes.buffer);
  #position = 0;

  get position(): number {
    return this.#position;
  }

  /** Appends a string's UTF-8 (a lone surrogate becomes U+FFFD, as with encodeInto); returns its bytes. */
  appendString(value: string): number {
    // UTF-8 takes at most 3 bytes per UTF-16 unit.
    this.#reserve(value.length * 3);
    const written = this.#writer.write(value, this.#position);
    this.#position += written;
    return written;
  }

  appendBytes(value: Uint8Array): number {
    this.#reserve(value.byteLength);
    this.#bytes.set(value, this.#position);
    this.#position += value.byteLength;
    return value.byteLength;
  }

  /** Appends `source`'s bytes [start, end) with one copy and no view object (the compiled Avro reader). */
  appendSlice(source: Buffer, start: number, end: number): number {
    const bytes = end - start;
    this.#reserve(bytes);
    if (bytes <= SHORT_SLICE) {
      // Buffer.copy costs ~40 ns a call (argument checks, the native crossing) whatever the
      // length; a loop copies 32 bytes in less, and most of a record's strings (levels, hosts,
      // ids) are that short (bench/hot-path-levers.md, "Short slices").
      const bytesOut = this.#bytes;
      let at = this.#position;
      for (let i = start; i < end; i++) bytesOut[at++] = source[i]!;
    } else {
      source.copy(this.#writer, this.#position, start, end);
    }
    this.#position += bytes;
    return bytes;
  }

  /** Room for `bytes` more at once: exactly that (and an eighth), not the next power of two. */
  reserve(bytes: number): void {
    const want = this.#position + bytes;
    if (want <= this.#bytes.length) return;
    const next = new Uint8Array(want + Math.floor(want / 8));
    next.set(this.#bytes.subarray(0, this.#position));
    this.#bytes = next;
    this.#writer = Buffer.from(next.buffer);
  }

  /** The values appended so far (a view, no copy). */
  view(): Uint8Array {
    return this.#bytes.subarray(0, this.#position);
  }

  #reserve(bytes: number): void {
    if (this.#position + bytes <= this.#bytes.length) return;
    this.#bytes = grow(this.#bytes, this.#position + bytes);
    this.#writer = Buffer.from(this.#bytes.buffer);
  }
}
