import { makeData, type Data, type DataType, type Decimal } from 'apache-arrow';
import { Validity, growAny, type ColumnBuilder, type NumericArray } from './column-builder';

/**
 * Builders of the declared-only scalar types. They have their own classes instead of
 * widening FixedWidthBuilder and VariableWidthBuilder: V8 specializes a method's element
 * stores per typed-array kind it has seen, and the seven inferred types' builders stay
 * monomorphic-to-trimorphic only while no other kind reaches them (the log-record hot
 * path). These are as direct (typed arrays wrapped with makeData), just not shared.
 * (LargeVariableWidthBuilder, for the same reason, is in variable-width-builders.ts.)
 */

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

  reserve(rows: number): void {
    if (rows > this.#values.length) this.#values = growAny(this.#values, rows);
    this.#validity.reserve(rows);
  }

  finish(): Data {
    return makeData({
      ...this.#validity.header(this.type, this.#length),
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
      ...this.#validity.header(this.type, this.#length),
      data: this.#words.subarray(0, this.#length * 4),
    });
  }

  #reserve(): void {
    if ((this.#length + 1) * 4 > this.#words.length)
      this.#words = growAny(this.#words, (this.#length + 1) * 4);
  }
}
