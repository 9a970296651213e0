import {
  makeData,
  type Data,
  type DataType,
  type Field,
  type FixedSizeList,
  type List,
  type Struct,
} from 'apache-arrow';
import { Validity, grow, growAny, type ColumnBuilder } from './column-builder';

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
      ...this.#validity.header(this.type, this.#length),
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
      ...this.#validity.header(this.type, this.#length),
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

  /** Rows for every child (their values' bytes are not known here: they grow as they go). */
  reserve(rows: number): void {
    for (const c of this.children) c.reserve?.(rows, 0);
    this.#validity.reserve(rows);
  }

  finish(): Data {
    return makeData({
      ...this.#validity.header(this.type, this.#length),
      children: this.children.map((c) => c.finish()),
    });
  }
}
