import type * as lancedb from '@lancedb/lancedb';
import type { LentConnection } from './connect';
import {
  type DataType,
  Field,
  FixedSizeList,
  Float,
  Int,
  type Vector,
  RecordBatch,
  Schema,
  Table as ArrowTable,
  makeData,
  Struct,
  vectorFromArray,
  type Data,
} from 'apache-arrow';
import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import { crashPoint } from '../faults/crash-points';
import { retryConflicts } from './commit-retry';
import { isMissingVersion } from './lance-errors';

/** Rows restored per insert-if-absent commit (the overwritten version of a young table is small). */
const RESTORE_CHUNK_ROWS = 50_000;

/**
 * Readies the latest table for rows of the overwritten version (`source`: its schema,
 * whose columns another replica may have added after the create) and returns the row
 * key to insert them on.
 */
export type PrepareTarget = (target: lancedb.Table, source: Schema) => Promise<readonly string[]>;

/** What a create did: the version its handle holds, and the rows of the version it landed over. */
export interface TableCreation {
  readonly version: number;
  /**
   * Rows the version before `version` held when the create committed over it (0: none).
   * `undefined`: the check could not read the table (the store failed it): the caller
   * restores anyway, and the restore checks again before it writes anything.
   */
  readonly overwrittenRows: number | undefined;
}

/**
 * Creates a table that other replicas may be creating at the same moment, and says
 * whether its create landed over rows (`restoreOverwrittenRows` puts them back).
 *
 * LanceDB's create (mode `create`, existOk) checks that the table is absent and then
 * commits, and Lance's commit looks again: a table it finds there now (another replica
 * created it in between, or the first look's listing came back short, as s3proxy's
 * filesystem backend's does) is committed over as an Overwrite, at the next version,
 * with none of the rows before it. Another replica's publications committed there (each
 * final once its add resolved: commit-rule.ts) would be gone; seen: 2 of 45 runs of four
 * publishers and a compactor on s3proxy 4.0.0 lost 600–3,000 rows this way. Lance has no
 * create that fails instead, so the creator checks what its create did. It creates on a
 * connection of its own that never reloads (`connect`), whose handle holds the version
 * the create committed (or the one an existOk open found). An empty version above 1
 * whose previous version holds rows is an overwrite (kafka-lance never deletes rows).
 * `create` is LanceDB's create; a test passes an explicit overwrite to land one where
 * it wants.
 */
export async function createTable(
  connect: () => Promise<LentConnection>,
  name: string,
  schema: Schema,
  logger: Logger,
  create: (db: lancedb.Connection) => Promise<lancedb.Table> = (db) =>
    db.createEmptyTable(name, schema, { mode: 'create', existOk: true }),
): Promise<TableCreation> {
  const lent = await connect();
  let created: lancedb.Table | undefined;
  try {
    created = await create(lent.db);
    crashPoint('after-create');
    const version = await created.version();
    if (version <= 1) return { version, overwrittenRows: 0 };
    let overwrittenRows: number;
    try {
      overwrittenRows = await rowsOverwrittenAt(created, version);
    } catch (error) {
      // Once the create has committed, nobody else will look at this version again.
      logger.warn(
        { event: 'lance.table.createCheckFailed', table: name, version, err: errorMessage(error) },
        'could not check whether the create landed over rows: the restore will check again',
      );
      return { version, overwrittenRows: undefined };
    }
    if (overwrittenRows > 0) {
      logger.warn(
        { event: 'lance.table.createdOver', table: name, version, overwrittenRows },
        'the table was created over a version of it that another writer had committed (Lance commits a late create as an overwrite): putting its rows back',
      );
    }
    return { version, overwrittenRows };
  } finally {
    created?.close();
    lent.release();
  }
}

/**
 * The rows a create committed at `version` (held by `table`, which this checks out)
 * landed over: those of the version before it when `version` itself holds none
 * (kafka-lance never deletes rows), else 0.
 */
async function rowsOverwrittenAt(table: lancedb.Table, version: number): Promise<number> {
  await table.checkout(version);
  if ((await table.countRows()) > 0) return 0;
  await table.checkout(version - 1);
  return table.countRows();
}

/** How far apart writers' clocks may be, for `findOverwrite`'s window. */
const CLOCK_SKEW_MS = 5 * 60_000;

/** What `findOverwrite` found: the version a create landed over rows at, or none, or one it cannot put back. */
export type FoundOverwrite =
  | { readonly kind: 'none' }
  | { readonly kind: 'found'; readonly version: number }
  /** An empty version whose previous one a cleanup has removed: its rows cannot come back. */
  | { readonly kind: 'gone'; readonly version: number };

/**
 * The first version committed since `since` (ms, a creator's intent, less the clock
 * skew) that is a create over rows: an empty version whose previous version holds rows
 * (kafka-lance never deletes rows). For a creator that did not learn its create's
 * version (restore-intent.ts). Versions are read by number, oldest first, from the
 * newest one listed before the window, never taken for absent because a listing lacks
 * them. `table` must be a handle of its own: this checks it out.
 */
export async function findOverwrite(table: lancedb.Table, since: number): Promise<FoundOverwrite> {
  const listed = await table.listVersions();
  // From the version after the newest one listed before the window (a listing may lack
  // those in it), else from the oldest listed: not below it, where versions may be cleaned up.
  const before = listed.filter((v) => v.timestamp.getTime() < since - CLOCK_SKEW_MS).map((v) => v.version);
  const oldest = Math.min(...listed.map((v) => v.version));
  let version = Math.max(
    2,
    before.length > 0 ? Math.max(...before) + 1 : Number.isFinite(oldest) ? oldest : 2,
  );
  for (; ; version += 1) {
    try {
      await table.checkout(version);
    } catch (error) {
      if (isMissingVersion(error, version)) return { kind: 'none' };
      throw error;
    }
    if ((await table.countRows()) > 0) continue;
    try {
      await table.checkout(version - 1);
    } catch (error) {
      if (isMissingVersion(error, version - 1)) return { kind: 'gone', version };
      throw error;
    }
    if ((await table.countRows()) > 0) return { kind: 'found', version };
  }
}

/**
 * Puts the rows of the version before `version` (the one a create landed over) back
 * into the latest table, insert-if-absent on the row key: a row already there
 * (put back by an earlier try, or published again) is not inserted twice, so a caller
 * whose restore failed simply calls it again. Returns the rows inserted.
 */
export async function restoreOverwrittenRows(
  connect: () => Promise<LentConnection>,
  live: lancedb.Connection,
  name: string,
  version: number,
  prepare: PrepareTarget,
  logger: Logger,
): Promise<number> {
  const lent = await connect();
  let from: lancedb.Table | undefined;
  try {
    from = await lent.db.openTable(name);
    // Checked here too: a create whose own check failed is restored without knowing.
    if ((await rowsOverwrittenAt(from, version)) === 0) return 0;
    const restoredRows = await restoreRows(from, live, name, prepare);
    logger.warn(
      { event: 'lance.table.restored', table: name, version, restoredRows },
      'the rows of the version a create landed over are back (each row key once)',
    );
    return restoredRows;
  } finally {
    from?.close();
    lent.release();
  }
}

/** Inserts the rows `from` holds (a checked-out version) into the latest table where their key is absent. */
async function restoreRows(
  from: lancedb.Table,
  live: lancedb.Connection,
  name: string,
  prepare: PrepareTarget,
): Promise<number> {
  const target = await live.openTable(name);
  try {
    const columns = [...(await prepare(target, await from.schema()))];
    const tableSchema = await target.schema();
    let restored = 0;
    let chunk: RecordBatch[] = [];
    let rows = 0;
    const flush = async () => {
      if (rows === 0) return;
      const data = new ArrowTable(chunk.map((b) => alignedTo(b, tableSchema)));
      const result = await retryConflicts(() =>
        target.mergeInsert(columns).whenNotMatchedInsertAll().useIndex(false).execute(data),
      );
      restored += result.numInsertedRows;
      chunk = [];
      rows = 0;
    };
    for await (const batch of from.query()) {
      chunk.push(batch);
      rows += batch.numRows;
      if (rows >= RESTORE_CHUNK_ROWS) await flush();
    }
    await flush();
    return restored;
  } finally {
    target.close();
  }
}

/**
 * `batch` with the table's columns in the table's order: one it lacks is all nulls. A
 * column keeps its own buffers and type (they are never read as another type's), but
 * for a number column the table has since widened (Int32 → Int64, Float32 → Float64),
 * whose values are written again in the table's type: Lance's merge casts nothing.
 */
function alignedTo(batch: RecordBatch, schema: Schema): RecordBatch {
  const fields: Field[] = [];
  const children = schema.fields.map((f): Data => {
    const column = batch.getChild(f.name);
    if (!column) {
      fields.push(f);
      return nullColumn(f.type as DataType, batch.numRows);
    }
    const widened = widenedTo(column, f.type as DataType);
    fields.push(new Field(f.name, widened.type, f.nullable, f.metadata));
    return widened;
  });
  const aligned = new Schema(fields, schema.metadata);
  const struct = makeData({ type: new Struct(aligned.fields), length: batch.numRows, children });
  return new RecordBatch(aligned, struct);
}

/**
 * `length` nulls of `type`. A fixed-size list (a vector) needs a child of length ×
 * size values even where every slot is null, which apache-arrow's own builder leaves
 * empty (and Lance refuses).
 */
function nullColumn(type: DataType, length: number): Data {
  if (type instanceof FixedSizeList && type.children[0]!.type instanceof Float) {
    return nullVectors(type as FixedSizeList<Float>, length) as Data;
  }
  return vectorFromArray(new Array<null>(length).fill(null), type).data[0] as Data;
}

function nullVectors(type: FixedSizeList<Float>, length: number): Data<FixedSizeList<Float>> {
  const element: Float = type.children[0]!.type;
  const values = length * type.listSize;
  const zeros = new (element.ArrayType as new (n: number) => Float['TArray'])(values);
  const child: Data<Float> = makeData({ type: element, length: values, data: zeros });
  return makeData({
    type,
    length,
    nullCount: length,
    nullBitmap: new Uint8Array(Math.ceil(length / 8)),
    child,
  });
}

/**
 * Whether rows with a column of type `rows` can be put back into a table whose column
 * is `table`: the same type, or one that holds every value of it (a wider integer that
 * keeps the sign, a float of more precision), which `alignedTo` writes them again in.
 */
export function restorableAs(table: DataType, rows: DataType): boolean {
  return typeText(table) === typeText(rows) || widens(table, rows);
}

// Every concrete DataType names itself (with its parameters); the base class does not declare it.
const typeText = (type: DataType): string => (type as DataType & { toString(): string }).toString();

function widens(to: DataType, from: DataType): boolean {
  if (to instanceof Int && from instanceof Int) {
    const keepsSign = (to.isSigned as boolean) || !(from.isSigned as boolean);
    return to.bitWidth > from.bitWidth && keepsSign;
  }
  if (to instanceof Float && from instanceof Float)
    return (to.precision as number) > (from.precision as number);
  return false;
}

/** `column` in `type` when the table has widened it (a wider integer or float), else as it is. */
function widenedTo(column: Vector, type: DataType): Data {
  const same = column.data[0] as Data;
  if (!widens(type, column.type as DataType)) return same;
  const is64 = type instanceof Int && type.bitWidth === 64;
  const values = Array.from({ length: column.length }, (_, i): unknown => {
    const v: unknown = column.get(i);
    if (v === null || v === undefined) return null;
    return is64 ? BigInt(v as number | bigint) : Number(v);
  });
  return vectorFromArray(values, type).data[0] as Data;
}
