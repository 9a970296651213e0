import { makeData, type Binary, type Data, type LargeBinary, type LargeUtf8, type Utf8 } from 'apache-arrow';
import { Validity, ValueBytes, grow, growAny, type ColumnBuilder } from './column-builder';

/** Where each row's values end in the value buffer: Int32 (Utf8, Binary) or 64-bit (their Large forms). */
interface ValueOffsets {
  /** Records that row `row - 1` ends at `position` (offset 0 is always 0). */
  set(row: number, position: number): void;
  reserve(rows: number): void;
  view(rows: number): Int32Array | BigInt64Array;
}

class Int32Offsets implements ValueOffsets {
  #offsets = new Int32Array(65);

  set(row: number, position: number): void {
    if (row >= this.#offsets.length) this.#offsets = grow(this.#offsets, row + 1);
    this.#offsets[row] = position;
  }

  reserve(rows: number): void {
    if (rows + 1 > this.#offsets.length) this.#offsets = grow(this.#offsets, rows + 1);
  }

  view(rows: number): Int32Array {
    return this.#offsets.subarray(0, rows + 1);
  }
}

class Int64Offsets implements ValueOffsets {
  #offsets = new BigInt64Array(65);

  set(row: number, position: number): void {
    if (row >= this.#offsets.length) this.#offsets = growAny(this.#offsets, row + 1);
    this.#offsets[row] = BigInt(position);
  }

  reserve(rows: number): void {
    if (rows + 1 > this.#offsets.length) this.#offsets = growAny(this.#offsets, rows + 1);
  }

  view(rows: number): BigInt64Array {
    return this.#offsets.subarray(0, rows + 1);
  }
}

/**
 * A variable-width column: one value buffer and the offsets where each row ends. The
 * log-record hot path only ever meets Int32Offsets here, so its calls stay monomorphic.
 */
class VariableWidthColumn implements ColumnBuilder {
  readonly #values = new ValueBytes();
  #length = 0;
  readonly #validity = new Validity();

  constructor(
    readonly type: Utf8 | Binary | LargeUtf8 | LargeBinary,
    private readonly offsets: ValueOffsets,
  ) {}

  get length(): number {
    return this.#length;
  }

  appendString(value: string): void {
    this.#values.appendString(value);
    this.#commit(true);
  }

  appendBytes(value: Uint8Array): void {
    this.#values.appendBytes(value);
    this.#commit(true);
  }

  appendSlice(source: Buffer, start: number, end: number): void {
    this.#values.appendSlice(source, start, end);
    this.#commit(true);
  }

  appendNull(): void {
    this.#commit(false);
  }

  reserve(rows: number, valueBytes: number): void {
    this.offsets.reserve(rows);
    this.#values.reserve(valueBytes);
    this.#validity.reserve(rows);
  }

  get valueBytes(): number {
    return this.#values.position;
  }

  finish(): Data {
    return makeData({
      ...this.#validity.header(this.type, this.#length),
      valueOffsets: this.offsets.view(this.#length),
      data: this.#values.view(),
    } as never);
  }

  #commit(valid: boolean): void {
    this.#validity.set(this.#length, valid);
    this.#length += 1;
    this.offsets.set(this.#length, this.#values.position);
  }
}

/** Utf8 or Binary: Int32 offsets and one value buffer. */
export class VariableWidthBuilder extends VariableWidthColumn {
  constructor(type: Utf8 | Binary) {
    super(type, new Int32Offsets());
  }
}

/** LargeUtf8 or LargeBinary: 64-bit offsets, so one part's values may pass 2 GiB. */
export class LargeVariableWidthBuilder extends VariableWidthColumn {
  constructor(type: LargeUtf8 | LargeBinary) {
    super(type, new Int64Offsets());
  }
}
