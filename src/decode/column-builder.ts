import {
  Binary,
  Bool,
  Float64,
  Int32,
  Int64,
  TimeUnit,
  Timestamp,
  Utf8,
  makeData,
  type Data,
} from 'apache-arrow';

/**
 * Column builders that write straight into typed arrays and one value buffer per
 * string column, wrapped zero-copy with `makeData`. apache-arrow's generic builders
 * cost ~4× the JSON parse itself (notes/performance.md); these stay near the parse.
 */
export interface ColumnBuilder {
  readonly length: number;
  appendNull(): void;
  finish(): Data;
}

const encoder = new TextEncoder();

class Validity {
  bits = new Uint8Array(64);
  nullCount = 0;

  set(index: number, valid: boolean): void {
    const byte = index >> 3;
    if (byte >= this.bits.length) this.bits = grow(this.bits, byte + 1);
    if (valid) this.bits[byte]! |= 1 << (index & 7);
    else this.nullCount += 1;
  }

  bitmap(length: number): Uint8Array {
    return this.bits.subarray(0, (length + 7) >> 3);
  }
}

function grow<T extends Uint8Array | Int32Array | Float64Array | BigInt64Array>(
  array: T,
  minLength: number,
): T {
  let length = Math.max(64, array.length);
  while (length < minLength) length *= 2;
  const next = new (array.constructor as new (n: number) => T)(length);
  next.set(array as never);
  return next;
}

/** Utf8 or Binary: Int32 offsets and one value buffer. */
export class VariableWidthBuilder implements ColumnBuilder {
  #offsets = new Int32Array(65);
  #values = new Uint8Array(1024);
  #position = 0;
  #length = 0;
  readonly #validity = new Validity();

  constructor(readonly type: Utf8 | Binary) {}

  get length(): number {
    return this.#length;
  }

  appendString(value: string): void {
    // encodeInto writes at most 3 bytes per UTF-16 unit.
    this.#reserve(value.length * 3);
    const { written } = encoder.encodeInto(value, this.#values.subarray(this.#position));
    this.#commit(written);
  }

  appendBytes(value: Uint8Array): void {
    this.#reserve(value.byteLength);
    this.#values.set(value, this.#position);
    this.#commit(value.byteLength);
  }

  appendNull(): void {
    this.#validity.set(this.#length, false);
    if (this.#length + 1 >= this.#offsets.length) this.#offsets = grow(this.#offsets, this.#length + 2);
    this.#length += 1;
    this.#offsets[this.#length] = this.#position;
  }

  finish(): Data {
    return makeData({
      type: this.type,
      length: this.#length,
      nullCount: this.#validity.nullCount,
      nullBitmap: this.#validity.bitmap(this.#length),
      valueOffsets: this.#offsets.subarray(0, this.#length + 1),
      data: this.#values.subarray(0, this.#position),
    } as never);
  }

  #reserve(bytes: number): void {
    if (this.#position + bytes > this.#values.length)
      this.#values = grow(this.#values, this.#position + bytes);
    if (this.#length + 1 >= this.#offsets.length) this.#offsets = grow(this.#offsets, this.#length + 2);
  }

  #commit(written: number): void {
    this.#validity.set(this.#length, true);
    this.#position += written;
    this.#length += 1;
    this.#offsets[this.#length] = this.#position;
  }
}

type FixedArray = Int32Array | Float64Array | BigInt64Array;

/** Int32, Float64, Int64 and Timestamp(ms) columns. */
export class FixedWidthBuilder<T extends FixedArray> implements ColumnBuilder {
  #values: T;
  #length = 0;
  readonly #validity = new Validity();

  constructor(
    readonly type: Int32 | Float64 | Int64 | Timestamp,
    create: (n: number) => T,
  ) {
    this.#values = create(64);
  }

  get length(): number {
    return this.#length;
  }

  append(value: T extends BigInt64Array ? bigint : number): void {
    if (this.#length >= this.#values.length) this.#values = grow(this.#values, this.#length + 1);
    (this.#values as unknown as Array<typeof value>)[this.#length] = value;
    this.#validity.set(this.#length, true);
    this.#length += 1;
  }

  appendNull(): void {
    if (this.#length >= this.#values.length) this.#values = grow(this.#values, this.#length + 1);
    this.#validity.set(this.#length, false);
    this.#length += 1;
  }

  finish(): Data {
    return makeData({
      type: this.type,
      length: this.#length,
      nullCount: this.#validity.nullCount,
      nullBitmap: this.#validity.bitmap(this.#length),
      data: this.#values.subarray(0, this.#length),
    } as never);
  }
}

export class BoolBuilder implements ColumnBuilder {
  readonly #values = new Validity();
  readonly #validity = new Validity();
  #length = 0;

  get length(): number {
    return this.#length;
  }

  append(value: boolean): void {
    this.#values.set(this.#length, value);
    this.#validity.set(this.#length, true);
    this.#length += 1;
  }

  appendNull(): void {
    this.#values.set(this.#length, false);
    this.#validity.set(this.#length, false);
    this.#length += 1;
  }

  finish(): Data {
    return makeData({
      type: new Bool(),
      length: this.#length,
      nullCount: this.#validity.nullCount,
      nullBitmap: this.#validity.bitmap(this.#length),
      data: this.#values.bitmap(this.#length),
    });
  }
}

export const newInt32 = () => new FixedWidthBuilder(new Int32(), (n) => new Int32Array(n));
export const newInt64 = () => new FixedWidthBuilder(new Int64(), (n) => new BigInt64Array(n));
export const newFloat64 = () => new FixedWidthBuilder(new Float64(), (n) => new Float64Array(n));
export const newTimestampMs = () =>
  new FixedWidthBuilder(new Timestamp(TimeUnit.MILLISECOND), (n) => new BigInt64Array(n));
export const newUtf8 = () => new VariableWidthBuilder(new Utf8());
export const newBinary = () => new VariableWidthBuilder(new Binary());
