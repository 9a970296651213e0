import { Binary, Bool, Field, Int32, RecordBatch, Schema, Struct, makeData, type Data } from 'apache-arrow';
import { DELETED_COLUMN, ROW_COLUMN, SYSTEM_FIELDS } from '../staging/system-columns';
import type { ColumnBuilder } from './column-builder';
import type { Converted, FieldCodec } from './field-codec';
import type { FieldState } from './field-state';
import { BoolBuilder, newBinary, newInt32, newInt64, newTimestampMs, newUtf8 } from './fixed-width-builders';
import type { RawMessage } from './raw-message';

export const KEY_COLUMN = '_key';

/**
 * Per column, the bytes of values a row took in its last batch: the next batch's builder takes
 * that room at once (ColumnBuilder.reserve). Keyed by the decoder's own column objects.
 */
const valueBytesPerRow = new WeakMap<FieldState, number>();

/** The record key's column as a batch sees it (key-column.ts's KeyColumn): its codec once its type is known. */
export interface BatchKey {
  readonly codec: FieldCodec | undefined;
}

/** What a batch's builders make room for up front. */
export interface BatchCapacity {
  readonly rows: number;
  /** The bytes of the batch's record values: no column's values take more. */
  readonly valueBytes: number;
}

/** The builders of one batch: system columns, then data columns in field order. */
export class BatchColumns {
  readonly #topic = newUtf8();
  readonly #partition = newInt32();
  readonly #offset = newInt64();
  readonly #timestamp = newTimestampMs();
  /** `_key`: created once the key's type is known (a registry key's, at its first key). */
  #key: ColumnBuilder | undefined;
  /** Rows appended before `_key` had a type: all null keys. */
  #keylessRows = 0;
  readonly #row = newInt32();
  readonly #topicId = newUtf8();
  /** Upsert mode: `_deleted` (a tombstone's row is its key's delete). */
  readonly #deleted = new BoolBuilder();
  readonly #data: { field: FieldState | { name: string; raw: true }; builder: ColumnBuilder }[] = [];
  #rows = 0;

  /** The topic and topic id as UTF-8, encoded once per batch rather than once per row. */
  readonly #topicBytes: Uint8Array;
  readonly #topicIdBytes: Uint8Array;

  constructor(
    fields: readonly FieldState[],
    private readonly raw: boolean,
    private readonly keys: BatchKey | undefined,
    private readonly rowIndex: boolean,
    topic: string,
    topicId: string,
    /**
     * Upsert mode: rows carry `_deleted` and `_key` is never null (a keyless record is a
     * dead letter before it gets here). With `deletes`, data columns but the key's are
     * nullable in the batch's schema, since a delete's row has no values but its key (a
     * value still gets its field's checks).
     */
    private readonly upsert?: { readonly deletes: boolean; readonly key: readonly string[] },
    /**
     * What this batch will likely hold (its messages: rows, and the bytes of their values), when
     * its builders are to be written to.
     */
    private readonly capacity?: BatchCapacity,
  ) {
    this.#topicBytes = Buffer.from(topic, 'utf8');
    this.#topicIdBytes = Buffer.from(topicId, 'utf8');
    if (capacity !== undefined) {
      const rows = capacity.rows;
      this.#topic.reserve(rows, rows * this.#topicBytes.length);
      this.#topicId.reserve(rows, rows * this.#topicIdBytes.length);
      this.#partition.reserve(rows);
      this.#offset.reserve(rows);
      this.#timestamp.reserve(rows);
    }
    if (raw) {
      this.#data.push({ field: { name: 'key', raw: true }, builder: newBinary() });
      this.#data.push({ field: { name: 'value', raw: true }, builder: newBinary() });
    } else {
      for (const f of fields) this.addField(f);
    }
  }

  addField(field: FieldState): void {
    const builder = field.codec.builder();
    const capacity = this.capacity;
    if (capacity !== undefined) {
      // A column's values never take more than the batch's own input: one large record in the
      // last batch must not make this one of many small records ask for gigabytes.
      const perRow = valueBytesPerRow.get(field) ?? 0;
      builder.reserve?.(capacity.rows, Math.min(capacity.valueBytes, Math.ceil(perRow * capacity.rows)));
    }
    for (let i = 0; i < this.#rows; i++) builder.appendNull();
    this.#data.push({ field, builder });
  }

  appendSystem(partition: number, m: RawMessage, rowIndex: number, key: Converted, deleted = false): void {
    if (this.upsert) this.#deleted.append(deleted);
    this.#topic.appendBytes(this.#topicBytes);
    this.#partition.append(partition);
    // Both are safe integers (the caller checked the timestamp): no BigInt per row.
    this.#offset.appendSafeInteger(m.offsetNumber);
    this.#timestamp.appendSafeInteger(m.timestampNumber);
    this.#topicId.appendBytes(this.#topicIdBytes);
    if (this.keys) this.#appendKey(key);
    if (this.rowIndex) this.#row.append(rowIndex);
    this.#rows += 1;
  }

  #appendKey(key: Converted): void {
    const codec = this.keys!.codec;
    if (!this.#key && codec) {
      this.#key = codec.builder();
      for (let i = 0; i < this.#keylessRows; i++) this.#key.appendNull();
    }
    if (!this.#key)
      this.#keylessRows += 1; // only null keys reach here: a key gives the type
    else if (key === null) this.#key.appendNull();
    else codec!.append(this.#key, key);
  }

  appendRaw(m: RawMessage): void {
    const [key, value] = this.#data;
    if (m.key) (key!.builder as ReturnType<typeof newBinary>).appendBytes(m.key);
    else key!.builder.appendNull();
    (value!.builder as ReturnType<typeof newBinary>).appendBytes(m.value!);
  }

  /** A delete's row (upsert mode): no values, after its `appendSystem(..., true)`. */
  appendNoValues(): void {
    for (const { builder } of this.#data) builder.appendNull();
  }

  /** The builder of data column `index` (field order), for readers that append to it directly. */
  dataBuilder(index: number): ColumnBuilder {
    return this.#data[index]!.builder;
  }

  appendValues(values: readonly Converted[]): void {
    values.forEach((v, i) => {
      const { field, builder } = this.#data[i]!;
      if (v === null) builder.appendNull();
      else (field as FieldState).codec.append(builder, v);
    });
  }

  finish(): RecordBatch | undefined {
    if (this.#rows > 0)
      for (const { field, builder } of this.#data)
        if (builder.valueBytes !== undefined && !('raw' in field))
          valueBytesPerRow.set(field, builder.valueBytes / this.#rows);
    return this.#finish(this.#data.map(({ builder }) => builder.finish()));
  }

  /**
   * The batch with the data columns made elsewhere (the native JSON decoder), one per
   * field in field order and as many rows as `appendSystem` appended.
   */
  finishWith(data: readonly Data[]): RecordBatch | undefined {
    if (data.length !== this.#data.length || data.some((d) => d.length !== this.#rows))
      throw new Error(
        `finishWith: ${data.length} columns for ${this.#data.length} fields, or rows ≠ ${this.#rows}`,
      );
    return this.#finish(data);
  }

  #finish(data: readonly Data[]): RecordBatch | undefined {
    if (this.#rows === 0) return undefined;
    const fields: Field[] = [...SYSTEM_FIELDS];
    const children: Data[] = [
      this.#topic.finish(),
      this.#partition.finish(),
      this.#offset.finish(),
      this.#timestamp.finish(),
      this.#topicId.finish(),
    ];
    const keyCodec = this.keys?.codec;
    if (this.#key && keyCodec) {
      fields.push(new Field(KEY_COLUMN, keyCodec.arrowType(), this.upsert === undefined));
      children.push(this.#key.finish());
    }
    if (this.upsert) {
      fields.push(new Field(DELETED_COLUMN, new Bool(), false));
      children.push(this.#deleted.finish());
    }
    if (this.rowIndex) {
      fields.push(new Field(ROW_COLUMN, new Int32(), false));
      children.push(this.#row.finish());
    }
    this.#data.forEach(({ field }, i) => {
      const type = 'raw' in field ? new Binary() : field.codec.arrowType();
      fields.push(
        new Field(
          field.name,
          type,
          'raw' in field || (this.upsert?.deletes === true && !this.upsert.key.includes(field.name))
            ? true
            : field.nullable,
        ),
      );
      children.push(data[i]!);
    });
    const schema = new Schema(fields);
    return new RecordBatch(
      schema,
      makeData({ type: new Struct(fields), length: this.#rows, nullCount: 0, children }),
    );
  }
}
