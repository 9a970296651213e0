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
  type DataType,
  type Decimal,
  type Field,
  type FixedSizeList,
  type LargeBinary,
  type LargeUtf8,
  type List,
  type Struct,
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
  /** A view of an int64 column's values as 32-bit halves (appendSafeInteger). */
  #halves: Uint32Array | undefined;
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

  /**
   * A safe integer into an Int64 or Timestamp column without making a BigInt per row
   * (Kafka offsets and timestamps): its two 32-bit halves, little-endian as Arrow is.
   */
  appendSafeInteger(value: number): void {
    if (this.#length >= this.#values.length) this.#values = grow(this.#values, this.#length + 1);
    if (this.#halves?.buffer !== this.#values.buffer)
      this.#halves = new Uint32Array(this.#values.buffer, this.#values.byteOffset, this.#values.length * 2);
    const high = Math.floor(value / 0x1_0000_0000);
    this.#halves[this.#length * 2] = value - high * 0x1_0000_0000;
    this.#halves[this.#length * 2 + 1] = high; // two's complement: Uint32Array stores it modulo 2^32
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

/**
 * The declared-only types below get their own builder classes instead of widening
 * FixedWidthBuilder and VariableWidthBuilder: V8 specializes a method's element stores
 * per typed-array kind it has seen, and the seven inferred types' builders stay
 * monomorphic-to-trimorphic only while no other kind reaches them (the log-record hot
 * path). These are as direct (typed arrays wrapped with makeData), just not shared.
 */
type NumericArray =
  | Int8Array
  | Int16Array
  | Int32Array
  | Uint8Array
  | Uint16Array
  | Uint32Array
  | Float32Array
  | BigInt64Array
  | BigUint64Array;

function growAny<T extends NumericArray>(array: T, minLength: number): T {
  let length = Math.max(64, array.length);
  while (length < minLength) length *= 2;
  const next = new (array.constructor as new (n: number) => T)(length);
  next.set(array as never);
  return next;
}

/** One value per row in a typed array: int8…uint64, float32, float16 (bits), date, timestamp(unit, zone). */
export class NumericBuilder<T extends NumericArray> implements ColumnBuilder {
  #values: T;
  #length = 0;
  readonly #validity = new Validity();

  constructor(
    readonly type: DataType,
    create: (n: number) => T,
  ) {
    this.#values = create(64);
  }

  get length(): number {
    return this.#length;
  }

  append(value: number | bigint): void {
    if (this.#length >= this.#values.length) this.#values = growAny(this.#values, this.#length + 1);
    (this.#values as unknown as (number | bigint)[])[this.#length] = value;
    this.#validity.set(this.#length, true);
    this.#length += 1;
  }

  appendNull(): void {
    if (this.#length >= this.#values.length) this.#values = growAny(this.#values, this.#length + 1);
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

/** Decimal128: the unscaled value as 4 little-endian 32-bit words of two's complement. */
export class DecimalBuilder implements ColumnBuilder {
  #words = new Uint32Array(256);
  #length = 0;
  readonly #validity = new Validity();

  constructor(readonly type: Decimal) {}

  get length(): number {
    return this.#length;
  }

  append(unscaled: bigint): void {
    this.#reserve();
    let v = BigInt.asUintN(128, unscaled);
    const at = this.#length * 4;
    for (let i = 0; i < 4; i++) {
      this.#words[at + i] = Number(v & 0xffffffffn);
      v >>= 32n;
    }
    this.#validity.set(this.#length, true);
    this.#length += 1;
  }

  appendNull(): void {
    this.#reserve();
    this.#validity.set(this.#length, false);
    this.#length += 1;
  }

  finish(): Data {
    return makeData({
      type: this.type,
      length: this.#length,
      nullCount: this.#validity.nullCount,
      nullBitmap: this.#validity.bitmap(this.#length),
      data: this.#words.subarray(0, this.#length * 4),
    });
  }

  #reserve(): void {
    if ((this.#length + 1) * 4 > this.#words.length)
      this.#words = growAny(this.#words, (this.#length + 1) * 4);
  }
}

/** LargeUtf8 or LargeBinary: 64-bit offsets, so one part's values may pass 2 GiB. */
export class LargeVariableWidthBuilder implements ColumnBuilder {
  #offsets = new BigInt64Array(65);
  #values = new Uint8Array(1024);
  #position = 0;
  #length = 0;
  readonly #validity = new Validity();

  constructor(readonly type: LargeUtf8 | LargeBinary) {}

  get length(): number {
    return this.#length;
  }

  appendString(value: string): void {
    this.#reserve(value.length * 3);
    const { written } = encoder.encodeInto(value, this.#values.subarray(this.#position));
    this.#commit(written, true);
  }

  appendBytes(value: Uint8Array): void {
    this.#reserve(value.byteLength);
    this.#values.set(value, this.#position);
    this.#commit(value.byteLength, true);
  }

  appendNull(): void {
    this.#reserve(0);
    this.#commit(0, false);
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
      this.#values = growAny(this.#values, this.#position + bytes);
    if (this.#length + 1 >= this.#offsets.length) this.#offsets = growAny(this.#offsets, this.#length + 2);
  }

  #commit(written: number, valid: boolean): void {
    this.#validity.set(this.#length, valid);
    this.#position += written;
    this.#length += 1;
    this.#offsets[this.#length] = BigInt(this.#position);
  }
}

/** A vector column: FixedSizeList<dim> over one flat typed array; a null row keeps dim zeros. */
export class VectorBuilder<T extends Float32Array | Uint16Array | Uint8Array> implements ColumnBuilder {
  #values: T;
  #length = 0;
  readonly #validity = new Validity();

  constructor(
    readonly type: FixedSizeList,
    private readonly dim: number,
    create: (n: number) => T,
  ) {
    this.#values = create(dim * 16);
  }

  get length(): number {
    return this.#length;
  }

  append(vector: T): void {
    this.#reserve();
    this.#values.set(vector, this.#length * this.dim);
    this.#validity.set(this.#length, true);
    this.#length += 1;
  }

  appendNull(): void {
    this.#reserve();
    this.#values.fill(0, this.#length * this.dim, (this.#length + 1) * this.dim);
    this.#validity.set(this.#length, false);
    this.#length += 1;
  }

  finish(): Data {
    const child = (this.type.children as readonly Field<DataType>[])[0]!;
    const values: Data = makeData({
      type: child.type,
      length: this.#length * this.dim,
      nullCount: 0,
      data: this.#values.subarray(0, this.#length * this.dim),
    } as never);
    return makeData({
      type: this.type,
      length: this.#length,
      nullCount: this.#validity.nullCount,
      nullBitmap: this.#validity.bitmap(this.#length),
      child: values,
    });
  }

  #reserve(): void {
    const need = (this.#length + 1) * this.dim;
    if (need > this.#values.length) this.#values = growAny(this.#values, need);
  }
}

/** A list column: Int32 offsets over one child column of any type. */
export class ListBuilder implements ColumnBuilder {
  #offsets = new Int32Array(65);
  #length = 0;
  readonly #validity = new Validity();

  constructor(
    readonly type: List,
    readonly child: ColumnBuilder,
  ) {}

  get length(): number {
    return this.#length;
  }

  /** Call after appending the list's items to `child`. */
  endList(): void {
    this.#end(true);
  }

  appendNull(): void {
    this.#end(false);
  }

  finish(): Data {
    return makeData({
      type: this.type,
      length: this.#length,
      nullCount: this.#validity.nullCount,
      nullBitmap: this.#validity.bitmap(this.#length),
      valueOffsets: this.#offsets.subarray(0, this.#length + 1),
      child: this.child.finish(),
    } as never);
  }

  #end(valid: boolean): void {
    if (this.#length + 1 >= this.#offsets.length) this.#offsets = grow(this.#offsets, this.#length + 2);
    this.#validity.set(this.#length, valid);
    this.#length += 1;
    this.#offsets[this.#length] = this.child.length;
  }
}

/** A struct column: one child column per field, all as long as the struct. */
export class StructBuilder implements ColumnBuilder {
  #length = 0;
  readonly #validity = new Validity();

  constructor(
    readonly type: Struct,
    readonly children: readonly ColumnBuilder[],
  ) {}

  get length(): number {
    return this.#length;
  }

  /** Call after appending one value (or null) to every child. */
  endStruct(): void {
    this.#validity.set(this.#length, true);
    this.#length += 1;
  }

  /** A null struct: its children hold nulls there too (masked by the struct's validity). */
  appendNull(): void {
    for (const c of this.children) c.appendNull();
    this.#validity.set(this.#length, false);
    this.#length += 1;
  }

  finish(): Data {
    return makeData({
      type: this.type,
      length: this.#length,
      nullCount: this.#validity.nullCount,
      nullBitmap: this.#validity.bitmap(this.#length),
      children: this.children.map((c) => c.finish()),
    });
  }
}
