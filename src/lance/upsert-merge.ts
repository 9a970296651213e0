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
import { takeRows } from './take-rows';

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
export function newerCondition(hasRow: boolean): string {
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
}

/**
 * The newest row of each key among the batches (a merge whose source holds a key twice
 * is refused by Lance 0.39: "Ambiguous merge inserts are prohibited"). A batch whose every
 * row is kept goes as it is; otherwise its kept rows are copied into one batch (take-rows.ts).
 */
export function reduceToNewest(
  batches: readonly RecordBatch[],
  keyColumns: readonly string[],
): ReducedPublication {
  const newest = new Map<string, { batch: number; row: number; position: Position }>();
  batches.forEach((batch, b) => {
    const system = stagedColumns(batch);
    const keys = keyColumns.map((c) => {
      const column = batch.getChild(c);
      if (!column) throw new Error(`a staged batch without its key column ${c}`);
      return keyValues(column);
    });
    const rowColumn = batch.getChild(ROW_COLUMN);
    const timestamps = batch.getChild(TIMESTAMP_COLUMN);
    for (let i = 0; i < batch.numRows; i++) {
      const position: Position = {
        topic: system.topic(i),
        topicId: system.topicId(i),
        partition: system.partition(i),
        offset: system.offset(i),
        row: Number(rowColumn?.get(i) ?? 0),
        timestamp: Number(timestamps?.get(i) ?? 0),
      };
      const key = keyIdentity(keys.map((k) => k(i)));
      const held = newest.get(key);
      if (!held || newer(position, held.position)) newest.set(key, { batch: b, row: i, position });
    }
  });
  const kept = batches.map(() => [] as number[]);
  for (const { batch, row } of newest.values()) kept[batch]!.push(row);
  const taken: RecordBatch[] = [];
  let deletes = 0;
  kept.forEach((rows, b) => {
    const batch = batches[b]!;
    if (rows.length === 0) return;
    const deleted = batch.getChild(DELETED_COLUMN);
    if (deleted) for (const r of rows) if (deleted.get(r) === true) deletes++;
    // Every row kept: the batch as it is; else its kept rows copied into one batch.
    if (rows.length === batch.numRows) taken.push(batch);
    else
      taken.push(
        takeRows(
          batch,
          rows.sort((x, y) => x - y),
        ),
      );
  });
  return { table: new ArrowTable(taken), upserts: newest.size - deletes, deletes };
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
 * The merge of a reduced publication. useIndex(false): the join scans the key columns
 * instead of the BTREE, because only the scan's path checks the keys it inserts against a
 * concurrent merge's (measured with LanceDB 0.39: four writers inserting one new key into
 * a table whose unenforced primary key is the merge key inserted it once with the scan
 * and four times through the index). The index still serves readers' lookups by key.
 */
export async function mergeNewest(
  table: lancedb.Table,
  keyColumns: readonly string[],
  reduced: ReducedPublication,
  hasRow: boolean,
  /** 'index': the join through the key's BTREE, for bench/upsert-cost.ts's comparison only. */
  join: 'scan' | 'index' = 'scan',
): Promise<MergeOutcome> {
  const result = await table
    .mergeInsert([...keyColumns])
    .whenMatchedUpdateAll({ where: newerCondition(hasRow) })
    .whenNotMatchedInsertAll()
    .useIndex(join === 'index')
    .execute(reduced.table);
  return {
    version: result.version,
    inserted: result.numInsertedRows,
    updated: result.numUpdatedRows,
    upserts: reduced.upserts,
    deletes: reduced.deletes,
  };
}
