import {
  Field,
  RecordBatch,
  Schema,
  Struct,
  Table as ArrowTable,
  DataType,
  makeData,
  vectorFromArray,
  Vector,
  type Data,
} from 'apache-arrow';
import { SEQUENCE_COLUMN } from '../config/upsert-options';
import {
  DELETED_COLUMN,
  OFFSET_COLUMN,
  PARTITION_COLUMN,
  ROW_COLUMN,
  TIMESTAMP_COLUMN,
  TOPIC_COLUMN,
  TOPIC_ID_COLUMN,
  stagedColumns,
} from '../staging/system-columns';
import { UNAVAILABLE_VALUE, placeholderIn } from '../decode/debezium-envelope';
import { takeData, takeRows } from './take-rows';
import { keyIdentity, keyValues } from './upsert-keys';
import { newer, type Position } from './upsert-order';

/**
 * An upsert publication reduced to what its merge writes (docs/design/upserts.md): the
 * newest row of each key, Debezium's TOASTed placeholders filled from the publication's own
 * earlier records where it has them, its newest truncate's delete rows, and every column of
 * the table. What only the table can give (placeholders without an earlier record, the
 * table's keys a truncate deletes) is left to the merge (upsert-merge.ts).
 */

export interface ReducedPublication {
  /** The newest row of each key, in the publication's order. */
  readonly table: ArrowTable;
  /** Rows of the reduced table that are upserts, and deletes. */
  readonly upserts: number;
  readonly deletes: number;
  /**
   * Rows still holding Debezium's placeholder for an unchanged TOASTed column (no earlier
   * record of their key in the publication had the value): the merge reads those columns
   * from the table's row of the key (`fillFromTable`, upsert-merge.ts).
   */
  readonly unavailable: readonly UnavailableCells[];
  /**
   * The publication's newest truncate (a delete row without a key, from a Debezium `t`): the
   * keys of the publication older than it are delete rows at its position already; the
   * merge adds one for each live key of the table older than it (`truncateTable`, upsert-merge.ts).
   */
  readonly truncate?: Truncate | undefined;
}

/** A truncate: its staged row alone (a template for delete rows at its position), and its position. */
export interface Truncate {
  readonly row: RecordBatch;
  readonly position: Position;
  /** The identities of the publication's keys, which the merge's own rows settle. */
  readonly keys: ReadonlySet<string>;
}

/** A reduced row whose `columns` hold the placeholder: its key, its position, where it is. */
export interface UnavailableCells {
  readonly batch: number;
  readonly row: number;
  readonly key: readonly unknown[];
  readonly position: Position;
  readonly columns: readonly string[];
}

/**
 * The newest row of each key among the batches (a merge whose source holds a key twice
 * is refused by Lance 0.39: "Ambiguous merge inserts are prohibited"). A batch whose every
 * row is kept goes as it is; otherwise its kept rows are copied into one batch (take-rows.ts).
 * A kept row holding Debezium's placeholder for an unchanged TOASTed column takes the value
 * of the newest earlier record of its key in the publication that had one (not across a
 * delete); without one, it is left for the merge to read from the table (`unavailable`).
 */
export function reduceToNewest(
  batches: readonly RecordBatch[],
  keyColumns: readonly string[],
  /** Whether a value may be the placeholder (a Debezium envelope's); elsewhere one that spells it is a value. */
  toastPlaceholders = true,
): ReducedPublication {
  const newest = new Map<
    string,
    { batch: number; row: number; position: Position; key: readonly unknown[] }
  >();
  const placeholders = batches.map((batch) =>
    toastPlaceholders ? unavailableCells(batch, keyColumns) : new Map<string, (row: number) => boolean>(),
  );
  const toasted = [...new Set(placeholders.flatMap((m) => [...m.keys()]))];
  let truncate: { batch: number; row: number; position: Position } | undefined;
  /** Per key, with placeholders about: the newest real value of each such column, and the newest delete. */
  const earlier = new Map<string, { values: Map<string, Held>; deleted: Position | undefined }>();
  batches.forEach((batch, b) => {
    const system = stagedColumns(batch);
    const keys = keyColumns.map((c) => {
      const column = batch.getChild(c);
      if (!column) throw new Error(`a staged batch without its key column ${c}`);
      return keyValues(column);
    });
    const rowColumn = batch.getChild(ROW_COLUMN);
    const timestamps = batch.getChild(TIMESTAMP_COLUMN);
    const deleted = batch.getChild(DELETED_COLUMN);
    const sequenceColumn = batch.getChild(SEQUENCE_COLUMN);
    const sequences = sequenceColumn ? keyValues(sequenceColumn) : undefined;
    for (let i = 0; i < batch.numRows; i++) {
      const position: Position = {
        topic: system.topic(i),
        topicId: system.topicId(i),
        partition: system.partition(i),
        offset: system.offset(i),
        row: Number(rowColumn?.get(i) ?? 0),
        timestamp: Number(timestamps?.get(i) ?? 0),
        sequence: sequences ? (sequences(i) as bigint | null) : null,
      };
      const keyValuesOfRow = keys.map((k) => k(i));
      if (keyValuesOfRow.every((v) => v === null) && deleted?.get(i) === true) {
        // A truncate (a delete without a key): applied to the keys older than it below.
        if (!truncate || newer(position, truncate.position)) truncate = { batch: b, row: i, position };
        continue;
      }
      const key = keyIdentity(keyValuesOfRow);
      const held = newest.get(key);
      if (!held || newer(position, held.position))
        newest.set(key, { batch: b, row: i, position, key: keyValuesOfRow });
      if (toasted.length === 0) continue;
      let state = earlier.get(key);
      if (!state) earlier.set(key, (state = { values: new Map(), deleted: undefined }));
      if (deleted?.get(i) === true) {
        if (!state.deleted || newer(position, state.deleted)) state.deleted = position;
        continue;
      }
      for (const c of toasted) {
        if (placeholders[b]!.get(c)?.(i)) continue;
        const value = state.values.get(c);
        if (!value || newer(position, value.position)) state.values.set(c, { position, batch: b, row: i });
      }
    }
  });
  const kept = batches.map(() => [] as number[]);
  /** Per batch, the rows of keys whose newest record is older than the truncate: deleted at its position. */
  const truncated = batches.map(() => [] as number[]);
  /** Per batch, kept row → its placeholder columns' values from earlier records, or unresolved. */
  const fills = batches.map(
    () =>
      new Map<
        number,
        { values: Map<string, unknown>; missing: string[]; key: readonly unknown[]; position: Position }
      >(),
  );
  for (const [identity, { batch, row, position, key }] of newest) {
    if (truncate && newer(truncate.position, position)) {
      truncated[batch]!.push(row);
      continue;
    }
    kept[batch]!.push(row);
    const columns = toasted.filter((c) => placeholders[batch]!.get(c)?.(row));
    if (columns.length === 0) continue;
    const state = earlier.get(identity)!;
    const fill = { values: new Map<string, unknown>(), missing: [] as string[], key, position };
    for (const c of columns) {
      const value = state.values.get(c);
      // A value from before the key's newest delete is not this row's: the table cannot help
      // either (the delete is older than this row); read as missing.
      if (value && (!state.deleted || newer(value.position, state.deleted)))
        fill.values.set(c, batches[value.batch]!.getChild(c)?.get(value.row) ?? null);
      else fill.missing.push(c);
    }
    fills[batch]!.set(row, fill);
  }
  const taken: RecordBatch[] = [];
  const unavailable: UnavailableCells[] = [];
  let deletes = 0;
  kept.forEach((rows, b) => {
    const batch = batches[b]!;
    if (rows.length === 0) return;
    const deleted = batch.getChild(DELETED_COLUMN);
    if (deleted) for (const r of rows) if (deleted.get(r) === true) deletes++;
    // Every row kept: the batch as it is; else its kept rows copied into one batch.
    rows.sort((x, y) => x - y);
    let out = rows.length === batch.numRows ? batch : takeRows(batch, rows);
    const fill = fills[b]!;
    if (fill.size > 0) {
      const original = (j: number) => (rows.length === batch.numRows ? j : rows[j]!);
      const columns = [...new Set([...fill.values()].flatMap((f) => [...f.values.keys()]))];
      out = withColumnValues(out, columns, (c, j, value) => {
        const f = fill.get(original(j));
        return f?.values.has(c) ? f.values.get(c) : value;
      });
      for (let j = 0; j < out.numRows; j++) {
        const f = fill.get(original(j));
        if (f && f.missing.length > 0)
          unavailable.push({
            batch: taken.length,
            row: j,
            key: f.key,
            position: f.position,
            columns: f.missing,
          });
      }
    }
    taken.push(out);
  });
  if (!truncate)
    return { table: new ArrowTable(taken), upserts: newest.size - deletes, deletes, unavailable };
  const template = takeRows(batches[truncate.batch]!, [truncate.row]);
  truncated.forEach((rows, b) => {
    if (rows.length === 0) return;
    taken.push(deleteRowsAt(template, batches[b]!, rows, keyColumns));
    deletes += rows.length;
  });
  return {
    table: new ArrowTable(taken),
    upserts: newest.size - deletes,
    deletes,
    unavailable,
    truncate: { row: template, position: truncate.position, keys: new Set(newest.keys()) },
  };
}

/**
 * Delete rows at a truncate's position for the keys at `rows` of `keys`: the truncate's row
 * (no values) once per key, its key columns taken from `keys`.
 */
export function deleteRowsAt(
  truncate: RecordBatch,
  keys: RecordBatch,
  rows: readonly number[],
  keyColumns: readonly string[],
): RecordBatch {
  const base = takeRows(
    truncate,
    rows.map(() => 0),
  );
  const children = base.schema.fields.map((field, c) => {
    if (!keyColumns.includes(field.name)) return base.data.children[c]!;
    const at = keys.schema.fields.findIndex((f) => f.name === field.name);
    return takeData(keys.data.children[at]!, rows);
  });
  return new RecordBatch(
    base.schema,
    makeData({ type: new Struct(base.schema.fields), length: rows.length, nullCount: 0, children }),
  );
}

interface Held {
  readonly position: Position;
  readonly batch: number;
  readonly row: number;
}

const PLACEHOLDER_BYTES = new TextEncoder().encode(UNAVAILABLE_VALUE);

/**
 * The string and binary columns of a staged batch that hold Debezium's placeholder in some row, each
 * with its test by row. The search runs over a column's value bytes at once (a publication
 * without a placeholder costs one `indexOf` per string column). Never a key column: Debezium
 * sends a key whole (a placeholder in one is a dead letter at decoding), and a key that spells
 * the placeholder is a key, which no stored row could fill (its merge failed on every retry).
 */
function unavailableCells(
  batch: RecordBatch,
  keyColumns: readonly string[],
): Map<string, (row: number) => boolean> {
  const found = new Map<string, (row: number) => boolean>();
  batch.schema.fields.forEach((field, c) => {
    if (SYSTEM_COLUMN_NAMES.has(field.name) || keyColumns.includes(field.name)) return;
    const type = field.type as DataType;
    if (DataType.isList(type)) {
      const test = listPlaceholders(batch.getChildAt(c)!, batch.data.children[c]!);
      if (test) found.set(field.name, test);
      return;
    }
    // Strings, and binary columns (a bytea), which hold the placeholder's UTF-8 bytes.
    if (
      !DataType.isUtf8(type) &&
      !DataType.isLargeUtf8(type) &&
      !DataType.isBinary(type) &&
      !DataType.isLargeBinary(type)
    )
      return;
    const data = batch.data.children[c]!;
    const bytes = data.values as Uint8Array;
    if (Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).indexOf(PLACEHOLDER_BYTES) < 0) return;
    const offsets = data.valueOffsets as Int32Array | BigInt64Array;
    found.set(field.name, (row) => {
      if (!data.getValid(row)) return false;
      const start = Number(offsets[row]!);
      if (Number(offsets[row + 1]!) - start !== PLACEHOLDER_BYTES.length) return false;
      return PLACEHOLDER_BYTES.every((byte, k) => bytes[start + k] === byte);
    });
  });
  return found;
}

/**
 * A list column's test by row for the placeholder in an array's shape (a text[] or uuid[] of
 * it, a bytea[] of its bytes, an int[] of its bytes: placeholderIn), or undefined when no row
 * is one. Only lists of one item or of the placeholder's length are read.
 */
function listPlaceholders(column: Vector, data: Data): ((row: number) => boolean) | undefined {
  const offsets = data.valueOffsets as Int32Array;
  const rows = new Set<number>();
  for (let row = 0; row < data.length; row++) {
    if (!data.getValid(row)) continue;
    const length = offsets[row + 1]! - offsets[row]!;
    if (length !== 1 && length !== PLACEHOLDER_BYTES.length) continue;
    const items = column.get(row) as Iterable<unknown> | null;
    if (items && placeholderIn([...items]) === 'typed') rows.add(row);
  }
  return rows.size === 0 ? undefined : (row) => rows.has(row);
}

const SYSTEM_COLUMN_NAMES = new Set([
  TOPIC_COLUMN,
  TOPIC_ID_COLUMN,
  PARTITION_COLUMN,
  OFFSET_COLUMN,
  TIMESTAMP_COLUMN,
  ROW_COLUMN,
  DELETED_COLUMN,
]);

/** The batch with `columns` rebuilt from their values, each row's value through `value`. */
export function withColumnValues(
  batch: RecordBatch,
  columns: readonly string[],
  value: (column: string, row: number, current: unknown) => unknown,
): RecordBatch {
  const children = batch.schema.fields.map((field, c) => {
    const data = batch.data.children[c]!;
    if (!columns.includes(field.name)) return data;
    const vector = batch.getChildAt(c)!;
    // A list's value (its own, or one read from the table) is a Vector: its items as an array.
    const values = Array.from({ length: batch.numRows }, (_, j) => {
      const v = value(field.name, j, vector.get(j));
      return v instanceof Vector ? [...(v as Iterable<unknown>)] : v;
    });
    return vectorFromArray(values, field.type as DataType).data[0]!;
  });
  return new RecordBatch(
    batch.schema,
    makeData({ type: new Struct(batch.schema.fields), length: batch.numRows, nullCount: 0, children }),
  );
}

/**
 * The reduced publication with every column of the table, a column it lacks all null. A
 * merge whose source lacks a column keeps the target's value there (measured with LanceDB
 * 0.39): an upsert is a record's whole state, so a column its publication never saw (added
 * to the table by another replica's rows since this one started) is null, not the older
 * record's value.
 */
export function withTableColumns(reduced: ReducedPublication, table: Schema): ReducedPublication {
  const first = reduced.table.batches[0];
  if (!first) return reduced;
  const missing = table.fields.filter((f) => !first.schema.fields.some((g) => g.name === f.name));
  if (missing.length === 0) return reduced;
  const fields = [...first.schema.fields, ...missing.map((f) => new Field(f.name, f.type, true))];
  const batches = reduced.table.batches.map((batch) => {
    const nulls = missing.map((f) => nullColumn(f.type as DataType, batch.numRows));
    const children = [...batch.data.children, ...nulls];
    return new RecordBatch(
      new Schema(fields),
      makeData({ type: new Struct(fields), length: batch.numRows, nullCount: 0, children }),
    );
  });
  return { ...reduced, table: new ArrowTable(batches) };
}

/**
 * A column of `length` nulls. A fixed-size list's (a vector's) children are there too, null:
 * apache-arrow's builders leave them out, which LanceDB refuses ("values length 0").
 */
export function nullColumn(type: DataType, length: number): Data {
  const nullBitmap = new Uint8Array((length + 7) >> 3);
  if (DataType.isFixedSizeList(type))
    return makeData({
      type,
      length,
      nullCount: length,
      nullBitmap,
      child: nullColumn(type.children[0]!.type as DataType, length * type.listSize),
    });
  if (DataType.isStruct(type))
    return makeData({
      type,
      length,
      nullCount: length,
      nullBitmap,
      children: type.children.map((c) => nullColumn(c.type as DataType, length)),
    });
  return vectorFromArray(new Array<null>(length).fill(null), type).data[0]!;
}
