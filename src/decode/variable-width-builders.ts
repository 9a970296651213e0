import { makeData, type Binary, type Data, type LargeBinary, type LargeUtf8, type Utf8 } from 'apache-arrow';
import { Validity, ValueBytes, grow, growAny, type ColumnBuilder } from './column-builder';

/** Utf8 or Binary: Int32 offsets and one value buffer. */
export class VariableWidthBuilder implements ColumnBuilder {
  #offsets = new Int32Array(65);
  readonly #values = new ValueBytes();
  #length = 0;
  readonly #validity = new Validity();

  constructor(readonly type: Utf8 | Binary) {}

  get length(): number {
    return this.#length;
  }

  appendString(value: string): void {
    this.#reserveOffset();
    this.#values.appendString(value);
    this.#commit(true);
  }

  appendBytes(value: Uint8Array): void {
    this.#reserveOffset();
    this.#values.appendBytes(value);
    this.#commit(true);
  }

  appendNull(): void {
    this.#reserveOffset();
    this.#commit(false);
  }

  finish(): Data {
    return makeData({
      type: this.type,
      length: this.#length,
      nullCount: this.#validity.nullCount,
      nullBitmap: this.#validity.bitmap(this.#length),
      valueOffsets: this.#offsets.subarray(0, this.#length + 1),
      data: this.#values.view(),
    } as never);
  }

  #reserveOffset(): void {
    if (this.#length + 1 >= this.#offsets.length) this.#offsets = grow(this.#offsets, this.#length + 2);
  }

  #commit(valid: boolean): void {
    this.#validity.set(this.#length, valid);
    this.#length += 1;
    this.#offsets[this.#length] = this.#values.position;
  }
}

/** LargeUtf8 or LargeBinary: 64-bit offsets, so one part's values may pass 2 GiB. */
export class LargeVariableWidthBuilder implements ColumnBuilder {
  #offsets = new BigInt64Array(65);
  readonly #values = new ValueBytes();
  #length = 0;
  readonly #validity = new Validity();

  constructor(readonly type: LargeUtf8 | LargeBinary) {}

  get length(): number {
    return this.#length;
  }

  appendString(value: string): void {
    this.#reserveOffset();
    this.#values.appendString(value);
    this.#commit(true);
  }

  appendBytes(value: Uint8Array): void {
    this.#reserveOffset();
    this.#values.appendBytes(value);
    this.#commit(true);
  }

  appendNull(): void {
    this.#reserveOffset();
    this.#commit(false);
  }

  finish(): Data {
    return makeData({
      type: this.type,
      length: this.#length,
      nullCount: this.#validity.nullCount,
      nullBitmap: this.#validity.bitmap(this.#length),
      valueOffsets: this.#offsets.subarray(0, this.#length + 1),
      data: this.#values.view(),
    } as never);
  }

  #reserveOffset(): void {
    if (this.#length + 1 >= this.#offsets.length) this.#offsets = growAny(this.#offsets, this.#length + 2);
  }

  #commit(valid: boolean): void {
    this.#validity.set(this.#length, valid);
    this.#length += 1;
    this.#offsets[this.#length] = BigInt(this.#values.position);
  }
}
