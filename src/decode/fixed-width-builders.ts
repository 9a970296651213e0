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
import { Validity, grow, type ColumnBuilder } from './column-builder';
import { VariableWidthBuilder } from './variable-width-builders';

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

  reserve(rows: number): void {
    if (rows > this.#values.length) this.#values = grow(this.#values, rows);
    this.#validity.reserve(rows);
  }

  finish(): Data {
    return makeData({
      ...this.#validity.header(this.type, this.#length),
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
