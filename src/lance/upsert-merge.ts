import type * as lancedb from '@lancedb/lancedb';
import {
  Field,
  RecordBatch,
  Schema,
  Struct,
  Table as ArrowTable,
  DataType,
  makeData,
  vectorFromArray,
  type Data,
  type Vector,
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
import { UNAVAILABLE_VALUE, filterableKeyType } from '../decode/debezium-envelope';
import { takeData, takeRows } from './take-rows';

/**
 * An upsert publication as one Lance commit (docs/design/upserts.md): the publication's
 * rows reduced to the newest per key, then one merge-insert on the key that inserts the
 * keys the table lacks and updates a key's row only when the incoming row's position is
 * newer than the one that wrote it. A delete is a row (`_deleted = true`) of the same
 * merge, so a publication's deletes land with its upserts, and an older record of a
 * deleted key met later (a replay, a zombie's late publication) loses to it.
 */

/** A row's place in Kafka's order, as the merge condition compares it. */
interface Position {
  readonly topic: string;
  readonly topicId: string | undefined;
  readonly partition: number;
  readonly offset: number;
  readonly row: number;
  readonly timestamp: number;
  /** The source sequence (`_sequence`, such as Debezium's `source.lsn`); null or absent: none. */
  readonly sequence?: bigint | null;
}

/**
 * Whether `a` is newer than `b`, exactly as `newerCondition` says it in SQL. In one
 * partition (of one topic incarnation) Kafka's order: the offset, then the row of a
 * record's transform. Across partitions Kafka has no order, so a key that moved
 * partition (the topic's partition count changed) or topic is ordered by its records'
 * timestamps, ties broken by partition then offset, so that every replica and every
 * replay decides alike. A tie of timestamps goes to the higher partition: a key that moved
 * to a lower partition within the same millisecond as its last record in the old one keeps
 * the old one's value (docs/design/upserts.md).
 */
export function newer(a: Position, b: Position): boolean {
  // A source sequence on both sides orders them first (a key's records across partitions and
  // topics included); equal or missing, the Kafka order decides.
  if (a.sequence != null && b.sequence != null && a.sequence !== b.sequence) return a.sequence > b.sequence;
  if (a.topic === b.topic && sameIncarnation(a.topicId, b.topicId) && a.partition === b.partition)
    return a.offset > b.offset || (a.offset === b.offset && a.row > b.row);
  if (a.timestamp !== b.timestamp) return a.timestamp > b.timestamp;
  if (a.partition !== b.partition) return a.partition > b.partition;
  return a.offset > b.offset;
}

/**
 * Whether two topic ids name the same incarnation. An unknown id ('': a broker without
 * topic ids, or a row staged before they were read) matches any: rows of one partition
 * then still compare by offset, never by timestamp (which would let an older record with a
 * later producer time win). Only a recreated topic read with ids on both sides differs.
 */
function sameIncarnation(a: string | undefined, b: string | undefined): boolean {
  return a === b || !a || !b;
}

/** `newer(source, target)` as a merge-insert condition (`source.` and `target.` columns). */
export function newerCondition(hasRow: boolean, hasSequence = false): string {
  const kafka = kafkaNewerCondition(hasRow);
  if (!hasSequence) return kafka;
  const s = `source.${SEQUENCE_COLUMN}`;
  const t = `target.${SEQUENCE_COLUMN}`;
  // Never NULL: IS NOT NULL is a boolean, and FALSE AND NULL is FALSE.
  const differ = `(${s} IS NOT NULL AND ${t} IS NOT NULL AND ${s} <> ${t})`;
  return `(${differ} AND ${s} > ${t}) OR (NOT ${differ} AND (${kafka}))`;
}

/** The Kafka order of `newer` in SQL. */
function kafkaNewerCondition(hasRow: boolean): string {
  const s = (c: string) => `source.${c}`;
  const t = (c: string) => `target.${c}`;
  const unknownId = (c: string) => `${c} IS NULL OR ${c} = ''`;
  const sameId = `(${s(TOPIC_ID_COLUMN)} = ${t(TOPIC_ID_COLUMN)} OR ${unknownId(s(TOPIC_ID_COLUMN))} OR ${unknownId(t(TOPIC_ID_COLUMN))})`;
  const same = [
    `${s(TOPIC_COLUMN)} = ${t(TOPIC_COLUMN)}`,
    sameId,
    `${s(PARTITION_COLUMN)} = ${t(PARTITION_COLUMN)}`,
  ].join(' AND ');
  const offsetNewer = `${s(OFFSET_COLUMN)} > ${t(OFFSET_COLUMN)}`;
  const inPartition = hasRow
    ? `${offsetNewer} OR (${s(OFFSET_COLUMN)} = ${t(OFFSET_COLUMN)} AND ${s(ROW_COLUMN)} > ${t(ROW_COLUMN)})`
    : offsetNewer;
  const across =
    `${s(TIMESTAMP_COLUMN)} > ${t(TIMESTAMP_COLUMN)} OR (${s(TIMESTAMP_COLUMN)} = ${t(TIMESTAMP_COLUMN)} AND ` +
    `(${s(PARTITION_COLUMN)} > ${t(PARTITION_COLUMN)} OR (${s(PARTITION_COLUMN)} = ${t(PARTITION_COLUMN)} AND ${offsetNewer})))`;
  return `((${same}) AND (${inPartition})) OR (NOT (${same}) AND (${across}))`;
}

/**
 * One key's identity as a string: each key column's value tagged with its kind, so that
 * the integer 1 and the text "1" are different keys, and a composite key's parts cannot
 * run into each other. Only rows of one table (one type per column) are compared.
 */
export function keyIdentity(values: readonly unknown[]): string {
  return JSON.stringify(
    values.map((v): [string, string | number | boolean | null] => {
      if (v === null || v === undefined) return ['null', null];
      if (typeof v === 'bigint') return ['int', v.toString()];
      if (typeof v === 'string') return ['str', v];
      if (typeof v === 'number') return ['num', v];
      if (typeof v === 'boolean') return ['bool', v];
      if (v instanceof Uint8Array)
        return ['bytes', Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex')];
      if (v instanceof Date) return ['time', v.getTime()];
      // Not a key column's type (config/upsert-options.ts refuses the rest): by its JSON text.
      return ['other', JSON.stringify(v) ?? ''];
    }),
  );
}

/**
 * A key column's values by row, exactly as stored. apache-arrow's `get` gives a Timestamp
 * or a Date as a float of milliseconds, so nanosecond (or microsecond) keys a nanosecond
 * apart would be one key and all but one of them dropped: those, and 64-bit integers, are
 * read from their buffers as the stored integer (bigint).
 */
export function keyValues(column: Vector): (row: number) => unknown {
  const type = column.type as DataType;
  const integral =
    DataType.isTimestamp(type) ||
    DataType.isDate(type) ||
    DataType.isTime(type) ||
    (DataType.isInt(type) && type.bitWidth === 64);
  if (!integral) return (row) => column.get(row) as unknown;
  const chunks = column.data;
  return (row) => {
    let local = row;
    for (const chunk of chunks) {
      if (local < chunk.length) {
        if (!chunk.getValid(local)) return null;
        // Data.slice slices the values buffer too: the chunk's row i is at index i.
        return BigInt((chunk.values as BigInt64Array | Int32Array)[local]!);
      }
      local -= chunk.length;
    }
    return null;
  };
}

export interface ReducedPublication {
  /** The newest row of each key, in the publication's order. */
  readonly table: ArrowTable;
  /** Rows of the reduced table that are upserts, and deletes. */
  readonly upserts: number;
  readonly deletes: number;
  /**
   * Rows still holding Debezium's placeholder for an unchanged TOASTed column (no earlier
   * record of their key in the publication had the value): the merge reads those columns
   * from the table's row of the key (`fillFromTable`).
   */
  readonly unavailable: readonly UnavailableCells[];
  /**
   * The publication's newest truncate (a delete row without a key, from a Debezium `t`): the
   * keys of the publication older than it are delete rows at its position already; the
   * merge adds one for each live key of the table older than it (`truncateTable`).
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
): ReducedPublication {
  const newest = new Map<
    string,
    { batch: number; row: number; position: Position; key: readonly unknown[] }
  >();
  const placeholders = batches.map(unavailableCells);
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
function deleteRowsAt(
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
 * The string columns of a staged batch that hold Debezium's placeholder in some row, each
 * with its test by row. The search runs over a column's value bytes at once (a publication
 * without a placeholder costs one `indexOf` per string column).
 */
function unavailableCells(batch: RecordBatch): Map<string, (row: number) => boolean> {
  const found = new Map<string, (row: number) => boolean>();
  batch.schema.fields.forEach((field, c) => {
    if (SYSTEM_COLUMN_NAMES.has(field.name)) return;
    const type = field.type as DataType;
    if (!DataType.isUtf8(type) && !DataType.isLargeUtf8(type)) return;
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
function withColumnValues(
  batch: RecordBatch,
  columns: readonly string[],
  value: (column: string, row: number, current: unknown) => unknown,
): RecordBatch {
  const children = batch.schema.fields.map((field, c) => {
    const data = batch.data.children[c]!;
    if (!columns.includes(field.name)) return data;
    const vector = batch.getChildAt(c)!;
    const values = Array.from({ length: batch.numRows }, (_, j) => value(field.name, j, vector.get(j)));
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
function nullColumn(type: DataType, length: number): Data {
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

export interface MergeOutcome {
  readonly version: number;
  /** Rows the merge inserted (keys new to the table) and updated (a newer position). */
  readonly inserted: number;
  readonly updated: number;
  readonly upserts: number;
  readonly deletes: number;
}

/**
 * Rows holding a TOASTed placeholder whose values one merge reads from the table and guards
 * (a term each in its condition): more would make a condition, and a filter, that grows with
 * the publication (tens of thousands of terms crash LanceDB 0.39).
 */
export const GUARDED_ROWS_PER_MERGE = 1_000;

/** Key values one read of the table's rows names (`IN (...)` per key column). */
const KEYS_PER_READ = 1_000;

/**
 * The merge of a reduced publication. useIndex(false): the join scans the key columns
 * instead of the BTREE, because only the scan's path checks the keys it inserts against a
 * concurrent merge's (measured with LanceDB 0.39: four writers inserting one new key into
 * a table whose unenforced primary key is the merge key inserted it once with the scan
 * and four times through the index). The index still serves readers' lookups by key.
 *
 * Rows holding a TOASTed column's placeholder take the value of the table's row of their
 * key, read just before (`fillFromTable`), and update it only if that row is still the one
 * read (a guard in the merge condition): a row an older record wrote meanwhile (another
 * owner's publication landing at that moment) would otherwise be replaced by a value from
 * before it. Such a row is merged again, filled from what is there now: a second commit,
 * only in that race. The first merge holds the publication's other rows, its truncate's
 * delete rows and up to GUARDED_ROWS_PER_MERGE of those rows; each further such slice is a
 * merge (a commit) of its own, so that neither the condition nor the values read grow with
 * the publication.
 */
export async function mergeNewest(
  table: lancedb.Table,
  keyColumns: readonly string[],
  reduced: ReducedPublication,
  hasRow: boolean,
  /** 'index': the join through the key's BTREE, for bench/upsert-cost.ts's comparison only. */
  join: 'scan' | 'index' = 'scan',
): Promise<MergeOutcome> {
  // Rows with a sequence (a definition naming one): the table has the column too (its schema
  // follows the staged one), and the reads below select it.
  const hasSequence = reduced.table.schema.fields.some((f) => f.name === SEQUENCE_COLUMN);
  const extra = [...(hasRow ? [ROW_COLUMN] : []), ...(hasSequence ? [SEQUENCE_COLUMN] : [])];
  const truncated = reduced.truncate ? await truncateTable(table, keyColumns, reduced.truncate, extra) : [];
  const tableSchema = await table.schema();
  // A publication of a truncate alone: its delete rows take the table's columns (nulls where
  // the staged row has none), as withTableColumns gives any other publication's rows.
  const schema =
    reduced.table.batches[0]?.schema ??
    (truncated.length > 0 ? widened(truncated[0]!.schema, tableSchema) : undefined);
  if (!schema) return { version: await table.version(), inserted: 0, updated: 0, upserts: 0, deletes: 0 };
  const slices: UnavailableCells[][] = [];
  for (let at = 0; at < reduced.unavailable.length; at += GUARDED_ROWS_PER_MERGE)
    slices.push(reduced.unavailable.slice(at, at + GUARDED_ROWS_PER_MERGE));
  const merge = mergeRound(table, keyColumns, hasRow, hasSequence, extra, schema, tableSchema, join);
  const plain = withoutRows(reduced.table, reduced.unavailable);
  const first = pick(reduced.table, slices[0] ?? []);
  let counts = await merge(
    { table: new ArrowTable([...first.table.batches, ...plain.batches]), unavailable: first.unavailable },
    truncated,
  );
  for (const slice of slices.slice(1)) {
    const next = await merge(pick(reduced.table, slice), []);
    counts = {
      version: next.version,
      inserted: counts.inserted + next.inserted,
      updated: counts.updated + next.updated,
    };
  }
  return {
    ...counts,
    upserts: reduced.upserts,
    deletes: reduced.deletes + truncated.reduce((n, b) => n + b.numRows, 0),
  };
}

/** Rows of a reduced table, and those of them whose placeholders the table fills. */
interface Slice {
  readonly table: ArrowTable;
  readonly unavailable: readonly UnavailableCells[];
}

interface Counts {
  readonly version: number;
  readonly inserted: number;
  readonly updated: number;
}

/**
 * One merge of a slice (its placeholders filled from the table and guarded), and again for
 * the rows the guard skipped because another writer's row of their key landed meanwhile.
 */
function mergeRound(
  table: lancedb.Table,
  keyColumns: readonly string[],
  hasRow: boolean,
  hasSequence: boolean,
  extra: readonly string[],
  schema: Schema,
  tableSchema: Schema,
  join: 'scan' | 'index',
): (slice: Slice, truncated: readonly RecordBatch[]) => Promise<Counts> {
  return async (slice, truncated) => {
    let counts: Counts | undefined;
    let pending = slice;
    for (let round = 0; ; round++) {
      const fill = await fillFromTable(table, keyColumns, pending, extra, tableSchema);
      const source = [...fill.table.batches, ...(round === 0 ? truncated : [])];
      const filled = new ArrowTable(source.map((b) => conformTo(b, schema)));
      const newerThanTarget = newerCondition(hasRow, hasSequence);
      const where = fill.guard === undefined ? newerThanTarget : `(${newerThanTarget}) AND (${fill.guard})`;
      const result = await table
        .mergeInsert([...keyColumns])
        .whenMatchedUpdateAll({ where })
        .whenNotMatchedInsertAll()
        .useIndex(join === 'index')
        .execute(filled);
      counts = {
        version: result.version,
        inserted: (counts?.inserted ?? 0) + result.numInsertedRows,
        updated: (counts?.updated ?? 0) + result.numUpdatedRows,
      };
      const skipped = await skippedByGuard(table, keyColumns, fill.guarded, extra, tableSchema);
      if (skipped.length === 0) return counts;
      if (round >= 8)
        throw new Error(
          `${skipped.length} rows with TOASTed placeholders lost ${round + 1} merges in a row to concurrent writes of their keys`,
        );
      pending = subset(fill.table, skipped);
    }
  };
}

/** The rows of `table` at `cells` (batch, row), as a slice whose cells point into it. */
function pick(table: ArrowTable, cells: readonly UnavailableCells[]): Slice {
  const byBatch = new Map<number, UnavailableCells[]>();
  for (const u of cells) byBatch.set(u.batch, [...(byBatch.get(u.batch) ?? []), u]);
  const batches: RecordBatch[] = [];
  const unavailable: UnavailableCells[] = [];
  for (const [b, rows] of byBatch) {
    rows.sort((x, y) => x.row - y.row);
    rows.forEach((u, j) => unavailable.push({ ...u, batch: batches.length, row: j }));
    batches.push(
      takeRows(
        table.batches[b]!,
        rows.map((u) => u.row),
      ),
    );
  }
  return { table: new ArrowTable(batches), unavailable };
}

/** `table` without the rows at `cells`. */
function withoutRows(table: ArrowTable, cells: readonly UnavailableCells[]): ArrowTable {
  if (cells.length === 0) return table;
  const dropped = table.batches.map(() => new Set<number>());
  for (const u of cells) dropped[u.batch]!.add(u.row);
  const batches: RecordBatch[] = [];
  table.batches.forEach((batch, b) => {
    const drop = dropped[b]!;
    if (drop.size === 0) batches.push(batch);
    else if (drop.size < batch.numRows)
      batches.push(
        takeRows(
          batch,
          Array.from({ length: batch.numRows }, (_, i) => i).filter((i) => !drop.has(i)),
        ),
      );
  });
  return new ArrowTable(batches.length > 0 ? batches : []);
}

/**
 * Delete rows at a truncate's position for each live key of the truncate's topic (and topic
 * id) older than it that the publication does not hold (those are its own rows already). The
 * keys are read a batch at a time, their key and position columns only; the delete rows go
 * in the publication's one commit, so a reader sees the table before the truncate or without
 * what came before it. Only a definition of one topic of one partition may apply truncates
 * (config and start checks): Kafka orders a truncate, which has no key, against that
 * partition's records alone. A key another owner inserts between this read and the commit
 * with an older record is not deleted (docs/design/upserts.md).
 */
async function truncateTable(
  table: lancedb.Table,
  keyColumns: readonly string[],
  truncate: Truncate,
  /** `_row` and `_sequence`, those of them the table has. */
  extra: readonly string[],
): Promise<RecordBatch[]> {
  const select = [...keyColumns, ...POSITION_COLUMNS, ...extra];
  const { topic, topicId } = truncate.position;
  const incarnation = topicId
    ? ` AND (${TOPIC_ID_COLUMN} = ${sqlString(topicId)} OR ${TOPIC_ID_COLUMN} IS NULL OR ${TOPIC_ID_COLUMN} = '')`
    : '';
  const live = table
    .query()
    .where(`${DELETED_COLUMN} = false AND ${TOPIC_COLUMN} = ${sqlString(topic)}${incarnation}`)
    .select([...select]);
  const deletes: RecordBatch[] = [];
  for await (const batch of live) {
    const positions = positionsOf(batch);
    const key = keyColumns.map((c) => keyValues(batch.getChild(c)!));
    const rows: number[] = [];
    for (let i = 0; i < batch.numRows; i++)
      if (!truncate.keys.has(keyIdentity(key.map((k) => k(i)))) && newer(truncate.position, positions(i)))
        rows.push(i);
    if (rows.length > 0) deletes.push(deleteRowsAt(truncate.row, batch, rows, keyColumns));
  }
  return deletes;
}

const POSITION_COLUMNS = [TOPIC_COLUMN, TOPIC_ID_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN, TIMESTAMP_COLUMN];

/** A batch read from the table: each row's position. */
function positionsOf(batch: RecordBatch): (row: number) => Position {
  const topics = batch.getChild(TOPIC_COLUMN)!;
  const ids = batch.getChild(TOPIC_ID_COLUMN);
  const partitions = batch.getChild(PARTITION_COLUMN)!;
  const offsets = keyValues(batch.getChild(OFFSET_COLUMN)!);
  const timestamps = keyValues(batch.getChild(TIMESTAMP_COLUMN)!);
  const rows = batch.getChild(ROW_COLUMN);
  const sequenceColumn = batch.getChild(SEQUENCE_COLUMN);
  const sequences = sequenceColumn ? keyValues(sequenceColumn) : undefined;
  return (i) => ({
    sequence: sequences ? (sequences(i) as bigint | null) : null,
    topic: topics.get(i) as string,
    topicId: (ids?.get(i) as string | null | undefined) ?? undefined,
    partition: partitions.get(i) as number,
    offset: Number(offsets(i)),
    row: Number(rows?.get(i) ?? 0),
    timestamp: Number(timestamps(i) ?? 0),
  });
}

/** `staged`'s fields, then the table's fields it lacks (nullable). */
function widened(staged: Schema, table: Schema): Schema {
  const missing = table.fields.filter((f) => !staged.fields.some((g) => g.name === f.name));
  return missing.length === 0
    ? staged
    : new Schema([...staged.fields, ...missing.map((f) => new Field(f.name, f.type, true))]);
}

/** The batch with exactly `schema`'s columns in its order, a column it lacks all null. */
function conformTo(batch: RecordBatch, schema: Schema): RecordBatch {
  if (batch.schema === schema) return batch;
  const children = schema.fields.map((field) => {
    const at = batch.schema.fields.findIndex((f) => f.name === field.name);
    return at >= 0 ? batch.data.children[at]! : nullColumn(field.type as DataType, batch.numRows);
  });
  return new RecordBatch(
    schema,
    makeData({ type: new Struct(schema.fields), length: batch.numRows, nullCount: 0, children }),
  );
}

/** Rows that read their placeholders' values from the table's row of their key. */
type Guarded = UnavailableCells;

/**
 * The slice with its placeholders replaced by the table's values: from the key's row when
 * that row is older than the incoming one and not a delete, else null (the key's earlier
 * record has not landed: a placeholder must never be written). `guard` keeps a filled row
 * from updating anything but the row it was filled from: one term per row, at most
 * GUARDED_ROWS_PER_MERGE of them.
 */
async function fillFromTable(
  table: lancedb.Table,
  keyColumns: readonly string[],
  slice: Slice,
  extra: readonly string[],
  schema: Schema,
): Promise<{ table: ArrowTable; guard: string | undefined; guarded: Guarded[] }> {
  const hasRow = extra.includes(ROW_COLUMN);
  if (slice.unavailable.length === 0) return { table: slice.table, guard: undefined, guarded: [] };
  const columns = [...new Set(slice.unavailable.flatMap((u) => u.columns))];
  const stored = await storedRows(
    table,
    keyColumns,
    slice.unavailable.map((u) => u.key),
    columns,
    extra,
    schema,
  );
  const guarded: Guarded[] = [];
  const terms: string[] = [];
  const byBatch = new Map<number, Map<number, Map<string, unknown>>>();
  for (const u of slice.unavailable) {
    const s = stored.get(keyIdentity(u.key));
    const usable = s !== undefined && !s.deleted && newer(u.position, s.position);
    const values = new Map<string, unknown>(
      u.columns.map((c) => [c, usable ? (s.values.get(c) ?? null) : null]),
    );
    let rows = byBatch.get(u.batch);
    if (!rows) byBatch.set(u.batch, (rows = new Map<number, Map<string, unknown>>()));
    rows.set(u.row, values);
    if (usable) {
      guarded.push(u);
      terms.push(
        `NOT (${isAt('source', u.position, hasRow)} AND NOT (${isAt('target', s.position, hasRow)}))`,
      );
    }
  }
  const batches = slice.table.batches.map((batch, b) => {
    const rows = byBatch.get(b);
    if (!rows) return batch;
    return withColumnValues(batch, columns, (c, j, current) => {
      const values = rows.get(j);
      return values?.has(c) ? values.get(c) : current;
    });
  });
  return {
    table: new ArrowTable(batches),
    guard: terms.length > 0 ? terms.join(' AND ') : undefined,
    guarded,
  };
}

/** The guarded rows the merge left alone though the table's row of their key is still older. */
async function skippedByGuard(
  table: lancedb.Table,
  keyColumns: readonly string[],
  guarded: readonly Guarded[],
  extra: readonly string[],
  schema: Schema,
): Promise<Guarded[]> {
  if (guarded.length === 0) return [];
  const stored = await storedRows(
    table,
    keyColumns,
    guarded.map((g) => g.key),
    [],
    extra,
    schema,
  );
  return guarded.filter((g) => {
    const s = stored.get(keyIdentity(g.key));
    return s === undefined || newer(g.position, s.position);
  });
}

/** The skipped rows of a filled slice, their placeholders back, to be merged again. */
function subset(filled: ArrowTable, rows: readonly Guarded[]): Slice {
  return pick(filled, rows);
}

/** `side`'s row is the one at `p` (a position names one record's row). */
function isAt(side: 'source' | 'target', p: Position, hasRow: boolean): string {
  const parts = [
    `${side}.${TOPIC_COLUMN} = ${sqlString(p.topic)}`,
    `${side}.${PARTITION_COLUMN} = ${p.partition}`,
    `${side}.${OFFSET_COLUMN} = ${p.offset}`,
  ];
  if (hasRow) parts.push(`${side}.${ROW_COLUMN} = ${p.row}`);
  return parts.join(' AND ');
}

const sqlString = (s: string) => `'${s.replace(/'/g, "''")}'`;

interface StoredRow {
  readonly position: Position;
  readonly deleted: boolean;
  readonly values: Map<string, unknown>;
}

/**
 * The table's rows of these keys by key identity: their position, whether a delete, and
 * `columns`' values. Read KEYS_PER_READ keys at a time, a batch at a time: each read filters
 * with one `IN (...)` per key column whose values a filter can name (`filterableKeyType`),
 * which may select rows of other keys (a composite key's values crossed), matched exactly
 * here. A key with no such column (times only) is read by scanning the key and position
 * columns of every row, a batch at a time (a Debezium definition sets such a key's
 * placeholders aside as dead letters instead: record-decoder.ts).
 */
async function storedRows(
  table: lancedb.Table,
  keyColumns: readonly string[],
  keys: readonly (readonly unknown[])[],
  columns: readonly string[],
  extra: readonly string[],
  schema: Schema,
): Promise<Map<string, StoredRow>> {
  const select = [
    ...keyColumns,
    ...columns.filter((c) => !keyColumns.includes(c)),
    ...POSITION_COLUMNS,
    DELETED_COLUMN,
    ...extra,
  ];
  const filterable = keyColumns
    .map((name, index) => ({ name, index }))
    .filter(({ name }) =>
      filterableKeyType(schema.fields.find((f) => f.name === name)?.type as DataType | undefined),
    );
  const found = new Map<string, StoredRow>();
  for (let at = 0; at < keys.length; at += KEYS_PER_READ) {
    const chunk = keys.slice(at, at + KEYS_PER_READ);
    const wanted = new Set(chunk.map((k) => keyIdentity(k)));
    const where = filterable
      .map(({ name, index }) => {
        const literals = new Set(chunk.map((k) => sqlLiteral(k[index])));
        return `${quoted(name)} IN (${[...literals].join(', ')})`;
      })
      .join(' AND ');
    let query = table.query().select([...select]);
    if (where !== '') query = query.where(where);
    for await (const batch of query) {
      const key = keyColumns.map((c) => keyValues(batch.getChild(c)!));
      const positions = positionsOf(batch);
      const deleted = batch.getChild(DELETED_COLUMN)!;
      for (let i = 0; i < batch.numRows; i++) {
        const identity = keyIdentity(key.map((k) => k(i)));
        if (!wanted.has(identity)) continue;
        found.set(identity, {
          position: positions(i),
          deleted: deleted.get(i) === true,
          values: new Map(columns.map((c) => [c, batch.getChild(c)?.get(i) as unknown])),
        });
      }
    }
  }
  return found;
}

/** A key value of a filterable column as a SQL literal (a null: NULL, which `IN` never matches). */
function sqlLiteral(v: unknown): string {
  if (typeof v === 'string') return sqlString(v);
  if (typeof v === 'bigint' || typeof v === 'number') return String(v);
  if (typeof v === 'boolean') return v ? 'TRUE' : 'FALSE';
  if (v instanceof Uint8Array)
    return `X'${Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex')}'`;
  return 'NULL';
}

/**
 * A column name as a LanceDB filter reads it whatever its characters. Not for `select`, which
 * takes names as they are (quoted there, the backticks stay in the result's column names).
 */
const quoted = (name: string) => (/^[a-z_][a-z0-9_]*$/.test(name) ? name : `\`${name.replace(/`/g, '``')}\``);
