import * as lancedb from '@lancedb/lancedb';
import { DataType, Field, Schema, type RecordBatch } from 'apache-arrow';
import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import {
  OFFSET_COLUMN,
  PARTITION_COLUMN,
  ROW_COLUMN,
  TOPIC_COLUMN,
  TOPIC_ID_COLUMN,
  systemColumnReader,
} from '../staging/system-columns';
import type { LentConnection } from './connect';
import { retryConflicts } from './commit-retry';
import { createTable, type TableCreation } from './table-creation';
import { LanceSchemaError, LanceWriteError, isSchemaRejection } from './lance-errors';
import { intervalFilter, quote } from './row-counts';

/**
 * A table's schema and key metadata as kafka-lance keeps them: created with the row key
 * as Lance's unenforced primary key and the system columns indexed, evolved only by
 * adding nullable columns, and a staged column's type checked against the table's.
 */

/**
 * The columns that identify a row, in key order: Lance's unenforced primary key. The
 * topic id is last so that the key of a table created before it (which Lance never
 * changes once set, and which could not take it anyway: a key column must be
 * non-nullable, and the column added to an existing table is nullable) is a prefix.
 */
export const ROW_KEY_COLUMNS: readonly string[] = [
  TOPIC_COLUMN,
  PARTITION_COLUMN,
  OFFSET_COLUMN,
  ROW_COLUMN,
  TOPIC_ID_COLUMN,
];
const PK_FLAG = 'lance-schema:unenforced-primary-key';
const PK_POSITION = 'lance-schema:unenforced-primary-key:position';

/** Columns as Lance's unenforced primary key, in this order. */
function primaryKeyMetadata(
  columns: readonly string[],
): { path: string; metadata: Record<string, string> }[] {
  return columns.map((path, i) => ({ path, metadata: { [PK_FLAG]: 'true', [PK_POSITION]: String(i + 1) } }));
}

/** The key columns of a schema (those it has), each with its primary-key metadata. */
export function rowKeyMetadata(
  names: readonly string[],
): { path: string; metadata: Record<string, string> }[] {
  return ROW_KEY_COLUMNS.filter((c) => names.includes(c)).map((path, i) => ({
    path,
    metadata: { [PK_FLAG]: 'true', [PK_POSITION]: String(i + 1) },
  }));
}

/** The table's unenforced primary key columns in position order ([] when it has none). */
export function primaryKeyOf(schema: Schema): string[] {
  return schema.fields
    .filter((f) => f.metadata.get(PK_FLAG) === 'true')
    .sort((a, b) => Number(a.metadata.get(PK_POSITION) ?? 0) - Number(b.metadata.get(PK_POSITION) ?? 0))
    .map((f) => f.name);
}

/**
 * Whether staged values of `staged`'s type go into the table's column as they are:
 * the same Arrow type (named with its parameters: a vector's dimension and element, a
 * timestamp's unit and zone, a decimal's precision and scale, nested children), or
 * Int32 into Int64, which LanceDB casts.
 */
export function sameColumnType(existing: Field, staged: Field): boolean {
  const was = String(existing.type);
  const now = String(staged.type);
  return was === now || (was === 'Int64' && now === 'Int32');
}

/** What the caller of a create does around it (lance-table.ts keeps the restore's duty). */
export interface CreateHooks {
  /** Before the create: from here on, a create may land over the table. */
  readonly beforeCreate: () => Promise<void>;
  /** After it: puts back the rows of the version it landed over, if it did (or could not tell). */
  readonly created: (creation: TableCreation) => Promise<void>;
}

/**
 * Creates the table for `schema` (when `current` is undefined; `createTable`, on a
 * connection from `connectOwn`, between the `hooks`), or adds the columns it lacks
 * (nullable); returns the table. A column typed otherwise in the table, or a name
 * Lance refuses, is a LanceSchemaError.
 */
export async function ensureTableSchema(
  db: lancedb.Connection,
  current: lancedb.Table | undefined,
  name: string,
  uri: string,
  schema: Schema,
  logger: Logger,
  connectOwn: () => Promise<LentConnection>,
  hooks: CreateHooks,
  upsertKey?: readonly string[],
): Promise<lancedb.Table> {
  const plain = new Schema(schema.fields);
  for (const f of plain.fields) {
    // Lance reads "." in a top-level name as a path into a struct and refuses it.
    if (f.name.includes('.')) {
      throw new LanceSchemaError(
        'invalid-column-name',
        name,
        `column "${f.name}" (${String(f.type)}) cannot be a Lance column: a top-level name may not contain "."`,
        { column: f.name, stagedType: String(f.type) },
      );
    }
  }
  let table = current;
  if (!table) {
    // Created with the row key as Lance's unenforced primary key, whatever the write
    // mode: an insert-if-absent publication needs it, an append ignores it. An upsert
    // table's key is its upsert key: Lance checks a merge's inserted keys against a
    // concurrent merge's on it (upsert-merge.ts).
    const keyed = upsertKey ? primaryKeyMetadata(upsertKey) : rowKeyMetadata(plain.fields.map((f) => f.name));
    const withKey = new Schema(
      plain.fields.map((f) => {
        const k = keyed.find((x) => x.path === f.name);
        return k ? new Field(f.name, f.type, f.nullable, new Map(Object.entries(k.metadata))) : f;
      }),
    );
    await hooks.beforeCreate();
    const creation = await schemaChange(name, () => createTable(connectOwn, name, withKey, logger));
    await hooks.created(creation);
    table = await db.openTable(name);
    // No system index here: built on an empty table it would cover no row until a
    // compaction folds rows in, so the first compaction builds it (LanceTable.optimize),
    // sparing a new table three index commits (200 routed tables: 600).
    logger.info(
      { event: 'lance.table.created', table: name, uri, version: creation.version },
      'Lance table created (or found created by another writer)',
    );
  }
  await addMissingColumns(table, name, plain, logger);
  return table;
}

/**
 * Adds the columns of `schema` the table lacks (nullable); a column typed otherwise in
 * the table, unless `accepts` takes it, is a LanceSchemaError. For staged data
 * (`sameColumnType`), and for rows put back after a create landed over them, whose number
 * columns the table may have widened (`restorableAs`, table-creation.ts).
 */
export async function addMissingColumns(
  table: lancedb.Table,
  name: string,
  schema: Schema,
  logger: Logger,
  accepts: (existing: Field, staged: Field) => boolean = sameColumnType,
): Promise<void> {
  const have = new Map((await table.schema()).fields.map((f) => [f.name, f]));
  const missing: Field[] = [];
  for (const f of schema.fields) {
    const existing = have.get(f.name);
    if (!existing) missing.push(new Field(f.name, f.type, true));
    else if (!accepts(existing, f)) {
      throw new LanceSchemaError(
        'type-conflict',
        name,
        `column ${f.name} is ${String(existing.type)} in the table but ${String(f.type)} in the staged data`,
        { column: f.name, tableType: String(existing.type), stagedType: String(f.type) },
      );
    }
  }
  if (missing.length > 0) {
    await schemaChange(name, () => table.addColumns(missing));
    logger.info(
      { event: 'lance.schema.evolved', table: name, added: missing.map((f) => f.name) },
      'added nullable columns',
    );
  }
}

/**
 * BTree on _offset, bitmaps on _partition and _topic_id: every settling count filters on
 * them. An upsert table's key columns get a BTree each (readers look rows up by key;
 * compaction keeps it fresh), but a binary one: Lance 0.39 builds no BTree on Binary.
 * Speed only: every read filters the same without them (merges scan: upsert-merge.ts).
 */
export async function ensureSystemIndexes(
  table: lancedb.Table,
  upsertKey: readonly string[] = [],
): Promise<void> {
  const existing = new Set((await table.listIndices()).map((i) => i.columns.join(',')));
  const fields = (await table.schema()).fields;
  // Not a table of ours (`kafka-lance compact` run on a table of other columns, or of columns
  // so named but otherwise typed: a bitmap on a Float64 `_partition` is refused): left as it is.
  const int = (name: string, bitWidth: number) =>
    fields.some((f) => f.name === name && DataType.isInt(f.type) && f.type.bitWidth === bitWidth);
  if (!int(OFFSET_COLUMN, 64) || !int(PARTITION_COLUMN, 32)) return;
  // `_topic_id` is absent from a table created before it existed.
  const missing = (column: string) => !existing.has(column) && fields.some((f) => f.name === column);
  for (const column of upsertKey) {
    const binary = fields.some((f) => f.name === column && DataType.isBinary(f.type));
    if (!binary && missing(column)) await table.createIndex(column, { config: lancedb.Index.btree() });
  }
  if (missing(OFFSET_COLUMN)) await table.createIndex(OFFSET_COLUMN, { config: lancedb.Index.btree() });
  if (missing(PARTITION_COLUMN))
    await table.createIndex(PARTITION_COLUMN, { config: lancedb.Index.bitmap() });
  // Few distinct values (one per incarnation of each topic): every settling count filters on it.
  if (missing(TOPIC_ID_COLUMN)) await table.createIndex(TOPIC_ID_COLUMN, { config: lancedb.Index.bitmap() });
}

/** A create or addColumns whose refusal by Lance becomes a LanceSchemaError; anything else stays retriable. */
async function schemaChange<T>(table: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (!isSchemaRejection(error)) throw error;
    throw new LanceSchemaError('rejected', table, `schema refused: ${errorMessage(error)}`, {}, error);
  }
}

/**
 * An upsert table's primary key must be its upsert key: a table created in append mode
 * (keyed on the row key) or with another key holds rows an upsert would not replace.
 * Refused, never changed (Lance changes no key once set).
 */
export async function ensureUpsertKey(
  table: lancedb.Table,
  key: readonly string[],
  name: string,
): Promise<void> {
  const have = primaryKeyOf(await table.schema());
  if (have.join(',') === key.join(',')) return;
  throw new LanceWriteError(
    `its primary key is (${have.join(', ')}), not the upsert key (${key.join(', ')}): it was created in append mode or with another key; upsert into a new table`,
    undefined,
    false,
    name,
  );
}

/** The merge-insert key, and whether it is a table's key from before `_topic_id` (see collidesWithOtherIncarnation). */
export interface InsertKey {
  readonly columns: string[];
  readonly legacy: boolean;
}

/**
 * The merge-insert key: the table's unenforced primary key, set on the row key
 * columns if the table has none yet (a table created before it was set at creation).
 * A key that differs from the row key is refused: inserts would not be checked.
 */
export async function ensureInsertKey(
  table: lancedb.Table,
  name: string,
  logger: Logger,
): Promise<InsertKey> {
  const schema = await table.schema();
  // A nullable column cannot be in a Lance key: `_topic_id` added to a table created
  // before it is nullable, so such a table keeps (and gets) the key without it.
  const wanted = ROW_KEY_COLUMNS.filter((c) => schema.fields.some((f) => f.name === c && !f.nullable));
  let key = primaryKeyOf(schema);
  if (key.length === 0) {
    try {
      await retryConflicts(() => table.updateFieldMetadata(rowKeyMetadata(wanted)));
    } catch (error) {
      // Another replica set it first (Lance refuses to change a key once set): read it.
      key = primaryKeyOf(await table.schema());
      if (key.length === 0) throw error;
    }
    key = primaryKeyOf(await table.schema());
    logger.info(
      { event: 'lance.key.set', table: name, key },
      'set the row key as the table\u2019s unenforced primary key (insert-if-absent publications)',
    );
  }
  if (key.join(',') !== wanted.join(',')) {
    throw new LanceWriteError(
      `its unenforced primary key is (${key.join(', ')}), not the row key (${wanted.join(', ')}): insert-if-absent publications would not be checked`,
      undefined,
      false,
      name,
    );
  }
  const legacy = !key.includes(TOPIC_ID_COLUMN) && schema.fields.some((f) => f.name === TOPIC_ID_COLUMN);
  return { columns: key, legacy };
}

/**
 * Whether the table holds rows at the batches' (topic, partition, offset) spans whose
 * topic id is not theirs (another incarnation, or null: rows written before topic
 * ids). Spans, not exact offsets: a false positive only costs the unchecked merge.
 */
export async function collidesWithOtherIncarnation(
  table: lancedb.Table,
  batches: readonly RecordBatch[],
): Promise<boolean> {
  const spans = new Map<
    string,
    { topic: string; partition: number; topicId: string; first: number; last: number }
  >();
  for (const b of batches) {
    const reader = systemColumnReader(b);
    if (!reader) continue;
    for (let i = 0; i < b.numRows; i++) {
      const topicId = reader.topicId(i);
      if (topicId === undefined) continue;
      const topic = reader.topic(i);
      const partition = reader.partition(i);
      const offset = reader.offset(i);
      const k = `${topic}\u0000${partition}\u0000${topicId}`;
      const s = spans.get(k);
      if (!s) spans.set(k, { topic, partition, topicId, first: offset, last: offset });
      else {
        s.first = Math.min(s.first, offset);
        s.last = Math.max(s.last, offset);
      }
    }
  }
  for (const s of spans.values()) {
    // A null id is a row written before topic ids: taken as this incarnation's (an
    // upgrade re-publishing a predecessor's tail must find it), never as another's.
    const filter = `${intervalFilter(s)} AND ${TOPIC_ID_COLUMN} IS NOT NULL AND ${TOPIC_ID_COLUMN} <> ${quote(s.topicId)}`;
    if ((await table.countRows(filter)) > 0) return true;
  }
  return false;
}
