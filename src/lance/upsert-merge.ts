import type * as lancedb from '@lancedb/lancedb';
import {
  Field,
  RecordBatch,
  Schema,
  Struct,
  Table as ArrowTable,
  makeData,
  type DataType,
} from 'apache-arrow';
import { SEQUENCE_COLUMN } from '../config/upsert-options';
import {
  DELETED_COLUMN,
  OFFSET_COLUMN,
  PARTITION_COLUMN,
  ROW_COLUMN,
  TOPIC_COLUMN,
  TOPIC_ID_COLUMN,
} from '../staging/system-columns';
import { filterableKeyType } from '../decode/debezium-envelope';
import { takeRows } from './take-rows';
import { keyIdentity, keyValues } from './upsert-keys';
import { POSITION_COLUMNS, newer, newerCondition, positionsOf, type Position } from './upsert-order';
import {
  deleteRowsAt,
  nullColumn,
  withColumnValues,
  type ReducedPublication,
  type Truncate,
  type UnavailableCells,
} from './upsert-reduce';

/**
 * An upsert publication as one Lance commit (docs/design/upserts.md): the publication's
 * rows reduced to the newest per key, then one merge-insert on the key that inserts the
 * keys the table lacks and updates a key's row only when the incoming row's position is
 * newer than the one that wrote it. A delete is a row (`_deleted = true`) of the same
 * merge, so a publication's deletes land with its upserts, and an older record of a
 * deleted key met later (a replay, a zombie's late publication) loses to it.
 *
 * This module holds the merge: its rounds, the fill of placeholders from the table's rows
 * under a guard, and a truncate's deletes of the table's keys. A row's order is
 * upsert-order.ts's, a key's identity upsert-keys.ts's, and the reduction of the publication
 * upsert-reduce.ts's.
 */

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
