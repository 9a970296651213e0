import * as lancedb from '@lancedb/lancedb';
import { Field, Schema, Table as ArrowTable, type RecordBatch } from 'apache-arrow';
import { injectedDiskFull } from '../common/disk-space';
import { DiskFullError, KafkaLanceError, errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import {
  OFFSET_COLUMN,
  PARTITION_COLUMN,
  ROW_COLUMN,
  TOPIC_COLUMN,
  TOPIC_ID_COLUMN,
  systemColumnReader,
} from '../staging/system-columns';
import { checkoutNewestFrom } from './newest-by-number';

export interface LanceTarget {
  /** A local directory or an object store URI (s3://, gs://, az://). */
  readonly uri: string;
  readonly table: string;
  readonly storageOptions?: Readonly<Record<string, string>>;
}

export interface OffsetIntervalFilter {
  readonly topic: string;
  readonly partition: number;
  readonly first: number;
  readonly last: number;
  /**
   * The incarnation of the topic (`_topic_id`): only its rows count. Undefined for rows
   * staged before the column existed (a ledger record or part of an older version):
   * then every row in the interval counts, as before.
   */
  readonly topicId?: string;
}

/** A Lance error classified once, here at the boundary: callers branch on `retriable`. */
export class LanceWriteError extends KafkaLanceError {
  constructor(message: string, cause: unknown, retriable: boolean, table: string) {
    super('LANCE_WRITE_FAILED', `Lance table ${table}: ${message}`, { cause, retriable, context: { table } });
  }
}

/**
 * How a publication's rows go in. `append`: one plain add (the ceiling rule keeps two
 * owners' rows apart). `insert-if-absent`: one merge-insert keyed on the table's
 * unenforced primary key (_topic, _partition, _offset[, _row]); Lance's conflict check
 * on inserted keys makes a concurrent or late insert of the same rows insert nothing
 * (DESIGN.md, "Commit after published").
 */
export type WriteMode = 'append' | 'insert-if-absent';

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
function primaryKeyOf(schema: Schema): string[] {
  return schema.fields
    .filter((f) => f.metadata.get(PK_FLAG) === 'true')
    .sort((a, b) => Number(a.metadata.get(PK_POSITION) ?? 0) - Number(b.metadata.get(PK_POSITION) ?? 0))
    .map((f) => f.name);
}

/** What makes staged data unfit for the table; none of them goes away by retrying. */
export type SchemaProblem = 'type-conflict' | 'invalid-column-name' | 'rejected';

/**
 * Staged data the table cannot take as it is (a column typed differently in the table,
 * a name Lance refuses): permanent, so the publication is set aside, never retried forever.
 */
export class LanceSchemaError extends KafkaLanceError {
  constructor(
    readonly problem: SchemaProblem,
    table: string,
    detail: string,
    facts: { column?: string; tableType?: string; stagedType?: string } = {},
    cause?: unknown,
  ) {
    super('LANCE_SCHEMA_INCOMPATIBLE', `Lance table ${table}: ${detail}`, {
      cause,
      retriable: false,
      context: { table, problem, ...facts },
    });
  }
}

/**
 * One Lance table as kafka-lance uses it: created on first publication with the
 * system columns indexed (BTree on _offset, bitmaps on _partition and _topic_id), evolved by adding
 * nullable columns, appended to with exactly one `add` per publication (one Lance
 * commit), and counted by offset intervals to resolve an interrupted publication.
 * It stays an ordinary LanceDB table that Python or Rust readers open as is.
 */
export class LanceTable {
  #table: lancedb.Table | undefined;
  /** Schema changes (create, indexes, new columns) one at a time in this process. */
  #schemaChanges: Promise<unknown> = Promise.resolve();
  /**
   * Adds one at a time in this process: two adds of one replica running at once would
   * commit the same version, which a store without put-if-absent lets one overwrite.
   */
  #adds: Promise<unknown> = Promise.resolve();
  /** The merge-insert key, once the table is known to carry it (insert-if-absent). */
  #insertKey: InsertKey | undefined;
  /** Set once the table is seen with `_topic_id` (a column is never dropped). */
  #hasTopicId = false;

  private constructor(
    readonly target: LanceTarget,
    private readonly db: lancedb.Connection,
    private readonly logger: Logger,
  ) {}

  static async connect(target: LanceTarget, logger: Logger): Promise<LanceTable> {
    const db = await lancedb.connect(target.uri, {
      // Other replicas append too: never read a stale version.
      readConsistencyInterval: 0,
      ...(target.storageOptions ? { storageOptions: { ...target.storageOptions } } : {}),
    });
    // The table is opened lazily: a storage failure shows up in a publication (retried), not at start.
    return new LanceTable(target, db, logger);
  }

  /** The table, once it exists (created by this or another replica). */
  async #current(): Promise<lancedb.Table | undefined> {
    if (!this.#table && (await this.db.tableNames()).includes(this.target.table)) {
      this.#table = await this.db.openTable(this.target.table);
    }
    return this.#table;
  }

  /**
   * Creates the table for `schema`, or adds the columns it lacks (nullable). Other
   * replicas may change the schema concurrently: a commit conflict is retried.
   */
  ensureSchema(schema: Schema): Promise<void> {
    const run = this.#schemaChanges.then(() => retryConflicts(() => this.#ensureSchema(schema)));
    this.#schemaChanges = run.catch(() => undefined);
    return run;
  }

  async #ensureSchema(schema: Schema): Promise<void> {
    const plain = new Schema(schema.fields);
    for (const f of plain.fields) {
      // Lance reads "." in a top-level name as a path into a struct and refuses it.
      if (f.name.includes('.')) {
        throw new LanceSchemaError(
          'invalid-column-name',
          this.target.table,
          `column "${f.name}" (${String(f.type)}) cannot be a Lance column: a top-level name may not contain "."`,
          { column: f.name, stagedType: String(f.type) },
        );
      }
    }
    await this.#current();
    if (!this.#table) {
      // Created with the row key as Lance's unenforced primary key, whatever the write
      // mode: an insert-if-absent publication needs it, an append ignores it.
      const keyed = rowKeyMetadata(plain.fields.map((f) => f.name));
      const withKey = new Schema(
        plain.fields.map((f) => {
          const k = keyed.find((x) => x.path === f.name);
          return k ? new Field(f.name, f.type, f.nullable, new Map(Object.entries(k.metadata))) : f;
        }),
      );
      this.#table = await schemaChange(this.target.table, () =>
        this.db.createEmptyTable(this.target.table, withKey, { mode: 'create', existOk: true }),
      );
      await this.#ensureIndexes();
      this.logger.info(
        { event: 'lance.table.created', table: this.target.table, uri: this.target.uri },
        'Lance table created',
      );
    }
    const current = await this.#table.schema();
    const have = new Map(current.fields.map((f) => [f.name, f]));
    const missing: Field[] = [];
    for (const f of plain.fields) {
      const existing = have.get(f.name);
      if (!existing) missing.push(new Field(f.name, f.type, true));
      else if (!sameColumnType(existing, f)) {
        throw new LanceSchemaError(
          'type-conflict',
          this.target.table,
          `column ${f.name} is ${String(existing.type)} in the table but ${String(f.type)} in the staged data`,
          { column: f.name, tableType: String(existing.type), stagedType: String(f.type) },
        );
      }
    }
    if (missing.length > 0) {
      const table = this.#table;
      await schemaChange(this.target.table, () => table.addColumns(missing));
      this.logger.info(
        { event: 'lance.schema.evolved', table: this.target.table, added: missing.map((f) => f.name) },
        'added nullable columns',
      );
    }
  }

  /**
   * The writer side of a publication. LanceDB 0.39's `add` takes a whole Arrow table
   * (no streaming add), so batches are assembled first; `beforeCommit` runs between
   * the assembly and the first `add` (the ledger's `writing` step). Kept behind an
   * AsyncIterable so a streaming add can replace the assembly later.
   *
   * `afterAdd` decides whether the rows are in the table for good (a rejected add can
   * have committed, so the caller may count them) and may ask for the same rows to be
   * added again ('again'; the publisher never does: a lost add is retried as a failed
   * publication from `writing`).
   */
  async append(
    batches: AsyncIterable<RecordBatch>,
    beforeCommit: (versionBefore: number) => Promise<void>,
    afterAdd: (addError: LanceWriteError | undefined) => Promise<'done' | 'again'> = (e) =>
      e ? Promise.reject(e) : Promise.resolve('done'),
    mode: WriteMode = 'append',
  ): Promise<{ rows: number; version: number | undefined; adds: number }> {
    const collected: RecordBatch[] = [];
    for await (const b of batches) collected.push(b);
    if (collected.length > 0) await this.ensureSchema(collected[0]!.schema);
    const rows = collected.reduce((n, b) => n + b.numRows, 0);
    const existing = rows === 0 ? undefined : this.#required();
    // A version at or below the newest before the add: where a count of its outcome
    // starts reading versions by number (countRowsFrom).
    await beforeCommit(existing ? await existing.version() : 0);
    if (!existing) return { rows, version: undefined, adds: 0 };
    const table = existing;
    const arrowTable = new ArrowTable(collected);
    const key = mode === 'insert-if-absent' ? await this.#ensureInsertKey(table) : undefined;
    let on = key?.columns;
    if (key?.legacy && (await this.#collides(table, collected))) {
      // A table keyed without the topic id holds rows of another incarnation at these
      // rows' (topic, partition, offset): on its key the merge would insert nothing and
      // the rows would be lost. On the key plus the topic id they go in; Lance's check
      // of concurrent inserts does not apply to a merge off the primary key, which
      // DESIGN.md ("A topic recreated under the same name") states as this table's window.
      on = [...key.columns, TOPIC_ID_COLUMN];
      this.logger.warn(
        { event: 'lance.key.legacy-collision', table: this.target.table, on },
        'rows of a recreated topic share (topic, partition, offset) with rows of its deleted incarnation, and the table’s key predates _topic_id: inserting on the key plus _topic_id',
      );
    }
    const write = async () => {
      if (!on) return table.add(arrowTable, { mode: 'append' });
      // useIndex(false): the scan join is the path whose inserted keys Lance checks
      // against concurrent merge-inserts (measured; with a single indexed key column
      // four concurrent merges of the same rows all inserted them).
      return table.mergeInsert(on).whenNotMatchedInsertAll().useIndex(false).execute(arrowTable);
    };
    let version: number | undefined;
    for (let adds = 1; ; adds++) {
      let addError: LanceWriteError | undefined;
      try {
        const add = this.#adds.then(() =>
          retryConflicts(() => {
            const injected = injectedDiskFull('lance', this.target.uri);
            return injected ? Promise.reject(injected) : write();
          }),
        );
        this.#adds = add.catch(() => undefined);
        const result = await add;
        version = (result as { version?: number }).version;
      } catch (error) {
        if (isSchemaRejection(error))
          throw new LanceSchemaError(
            'rejected',
            this.target.table,
            `add refused: ${errorMessage(error)}`,
            {},
            error,
          );
        // A full disk is named as such (never a reason to set the plan aside): see failure.ts.
        const cause = isDiskFullText(error)
          ? new DiskFullError('lance', this.target.uri, 'add', error)
          : error;
        addError = new LanceWriteError('add failed', cause, true, this.target.table);
      }
      if ((await afterAdd(addError)) === 'done') return { rows, version, adds };
    }
  }

  /**
   * The merge-insert key: the table's unenforced primary key, set on the row key
   * columns if the table has none yet (a table created before it was set at creation).
   * A key that differs from the row key is refused: inserts would not be checked.
   */
  async #ensureInsertKey(table: lancedb.Table): Promise<InsertKey> {
    if (this.#insertKey) return this.#insertKey;
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
      this.logger.info(
        { event: 'lance.key.set', table: this.target.table, key },
        'set the row key as the table\u2019s unenforced primary key (insert-if-absent publications)',
      );
    }
    if (key.join(',') !== wanted.join(',')) {
      throw new LanceWriteError(
        `its unenforced primary key is (${key.join(', ')}), not the row key (${wanted.join(', ')}): insert-if-absent publications would not be checked`,
        undefined,
        false,
        this.target.table,
      );
    }
    const legacy = !key.includes(TOPIC_ID_COLUMN) && schema.fields.some((f) => f.name === TOPIC_ID_COLUMN);
    this.#insertKey = { columns: key, legacy };
    return this.#insertKey;
  }

  /**
   * Whether the table holds rows at the batches' (topic, partition, offset) spans whose
   * topic id is not theirs (another incarnation, or null: rows written before topic
   * ids). Spans, not exact offsets: a false positive only costs the unchecked merge.
   */
  async #collides(table: lancedb.Table, batches: readonly RecordBatch[]): Promise<boolean> {
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

  /**
   * How many rows carry each row key (see `rowKey`) in the intervals, on the open handle,
   * or with `from` on the newest version by number (as `countRowsFrom`). It reads the key
   * columns of every row in the intervals, so it runs only when a count of a
   * publication's rows does not match its plan.
   */
  async rowKeyCounts(
    intervals: readonly OffsetIntervalFilter[],
    from?: number,
  ): Promise<Map<string, number>> {
    if (intervals.length === 0) return new Map();
    const table = await this.#current();
    if (!table) return new Map();
    if (from === undefined) return keyCounts(table, intervals);
    // On the newest version by number, as the count it explains (countRowsFrom).
    return this.#onNewestFrom(from, (probe) => keyCounts(probe, intervals));
  }

  /** Rows whose (topic, partition, offset) fall in the intervals. */
  async countRows(intervals: readonly OffsetIntervalFilter[]): Promise<number> {
    const table = intervals.length === 0 ? undefined : await this.#current();
    if (!table) return 0;
    this.#hasTopicId ||= (await table.schema()).fields.some((f) => f.name === TOPIC_ID_COLUMN);
    return countIntervals(table, intervals, this.#hasTopicId);
  }

  /**
   * Rows whose (topic, partition, offset) fall in the intervals, in the table's newest
   * version found by number from `from` (a version this process saw), never through a
   * listing of versions, which a store can return short (see newest-by-number.ts). The
   * count that decides whether an add whose answer failed committed.
   */
  async countRowsFrom(intervals: readonly OffsetIntervalFilter[], from: number): Promise<number> {
    if (intervals.length === 0 || !(await this.#current())) return 0;
    return this.#onNewestFrom(from, async (probe) => {
      const hasTopicId = (await probe.schema()).fields.some((f) => f.name === TOPIC_ID_COLUMN);
      return countIntervals(probe, intervals, hasTopicId);
    });
  }

  /** `read` on a handle of its own, checked out at the newest version found by number from `from`. */
  async #onNewestFrom<T>(from: number, read: (probe: lancedb.Table) => Promise<T>): Promise<T> {
    const probe = await this.db.openTable(this.target.table);
    try {
      await checkoutNewestFrom(probe, from);
      return await read(probe);
    } finally {
      probe.close();
    }
  }

  async totalRows(): Promise<number> {
    const table = await this.#current();
    return table ? table.countRows() : 0;
  }

  /**
   * Compaction, index update and version cleanup (LanceDB optimize); a commit conflict
   * is retried here. `cleanupOlderThanMs`: 0 keeps every version; otherwise a version
   * is removed only once it has not been the latest for that long (see
   * `safeCleanupCutoff`), never by LanceDB's own rule (created that long ago), which
   * on a store without atomic commits can delete the files of the version a publisher
   * still in flight builds on; and only below a cleanup fence committed first
   * (`commitCleanupFence`), which every insert-if-absent merge that read an older
   * version meets at its commit, however long it ran. Resolves with undefined when the
   * table does not exist yet.
   */
  async optimize(cleanupOlderThanMs = 0, now = Date.now()): Promise<OptimizeOutcome | undefined> {
    const table = await this.#current();
    if (!table) return undefined;
    // The handle reads the latest version (readConsistencyInterval 0), as listVersions lists all.
    return retryConflicts(async () => {
      let cutoff = 0;
      if (cleanupOlderThanMs > 0) {
        const keepFrom = await commitCleanupFence(table, this.target.table);
        cutoff = safeCleanupCutoff(await table.listVersions(), now - cleanupOlderThanMs, keepFrom);
      }
      // new Date(0): LanceDB's default (7 days) would otherwise apply; nothing is older than 1970.
      const stats = await table.optimize({ cleanupOlderThan: new Date(cutoff) });
      return {
        fragmentsRemoved: stats.compaction.fragmentsRemoved,
        fragmentsAdded: stats.compaction.fragmentsAdded,
        versionsRemoved: stats.prune.oldVersionsRemoved,
        bytesRemoved: stats.prune.bytesRemoved,
        cutoff: cutoff > 0 ? new Date(cutoff) : undefined,
      };
    });
  }

  /**
   * Releases the native handles. LanceDB refuses to close a handle while a call on it is
   * still in flight ("cannot be borrowed mutably"); the caller is then already on a
   * failure or shutdown path, and that error would hide the one that matters, so the
   * handle is left to the garbage collector instead.
   */
  close(): void {
    for (const handle of [this.#table, this.db]) {
      try {
        handle?.close();
      } catch {
        // in flight: freed when collected
      }
    }
  }

  async #ensureIndexes(): Promise<void> {
    const table = this.#required();
    const existing = new Set((await table.listIndices()).map((i) => i.columns.join(',')));
    if (!existing.has(OFFSET_COLUMN))
      await table.createIndex(OFFSET_COLUMN, { config: lancedb.Index.btree() });
    if (!existing.has(PARTITION_COLUMN))
      await table.createIndex(PARTITION_COLUMN, { config: lancedb.Index.bitmap() });
    // Few distinct values (one per incarnation of each topic): every settling count filters on it.
    const hasTopicId = (await table.schema()).fields.some((f) => f.name === TOPIC_ID_COLUMN);
    if (hasTopicId && !existing.has(TOPIC_ID_COLUMN))
      await table.createIndex(TOPIC_ID_COLUMN, { config: lancedb.Index.bitmap() });
  }

  #required(): lancedb.Table {
    if (!this.#table) throw new Error(`Lance table ${this.target.table} is not created yet`);
    return this.#table;
  }
}

export interface OptimizeOutcome {
  readonly fragmentsRemoved: number;
  readonly fragmentsAdded: number;
  readonly versionsRemoved: number;
  readonly bytesRemoved: number;
  /** Versions created before this were removable; undefined: no cleanup asked. */
  readonly cutoff: Date | undefined;
}

/**
 * The `cleanupOlderThan` (ms since the epoch) that removes only versions superseded
 * before `retainSince`. LanceDB removes every version created before the cutoff except
 * the latest: after a quiet period, the version that was the latest until a moment ago
 * (and the compaction of this very call supersedes the latest) was created long ago.
 * A writer that read it as the latest just before (a publication in flight) commits a
 * manifest that keeps its fragments, whose files a compaction rewrote; on a store
 * without put-if-absent that manifest can replace the compaction's, and its files
 * must still exist. So the cutoff is the creation time of the version that was the
 * latest at `retainSince` (kept: LanceDB compares with `<`), or earlier if a later
 * version carries an earlier timestamp (another writer's clock).
 */
export function safeCleanupCutoff(
  versions: readonly { readonly version: number; readonly timestamp: Date }[],
  retainSince: number,
  keepFrom = Number.POSITIVE_INFINITY,
): number {
  const sorted = [...versions].sort((a, b) => a.version - b.version);
  let latestThen = -1;
  for (let i = 0; i < sorted.length; i++) if (sorted[i]!.timestamp.getTime() <= retainSince) latestThen = i;
  // Every version is newer than retainSince: nothing is removable.
  if (latestThen < 0) return 0;
  let cutoff = retainSince;
  for (const v of sorted.slice(latestThen)) cutoff = Math.min(cutoff, Math.floor(v.timestamp.getTime()));
  return keepFromCutoff(sorted, cutoff, keepFrom);
}

/**
 * `cutoff` lowered so that every version from `keepFrom` on (a cleanup fence and what
 * followed it) is kept, whatever clock stamped it: LanceDB removes by timestamp.
 */
export function keepFromCutoff(
  versions: readonly { readonly version: number; readonly timestamp: Date }[],
  cutoff: number,
  keepFrom: number,
): number {
  let kept = cutoff;
  for (const v of versions)
    if (v.version >= keepFrom) kept = Math.min(kept, Math.floor(v.timestamp.getTime()));
  return kept;
}

/** A cleanup fence that did not commit as one: nothing is cleaned up without it. */
export class CleanupFenceError extends KafkaLanceError {
  constructor(table: string, detail: string, cause?: unknown) {
    super('LANCE_WRITE_FAILED', `Lance table ${table}: cleanup fence ${detail}; no version removed`, {
      cause,
      retriable: true,
      context: { table },
    });
  }
}

/**
 * Commits a cleanup fence and returns the lowest version a cleanup after it must keep.
 *
 * Lance checks a commit against the manifests written after its read version that
 * still exist: a version removed by cleanup is skipped. An insert-if-absent merge that
 * read the table before a cleanup and commits after it (a replica frozen inside its
 * merge, a whole-table join on a large table: no bound on how long) would then miss a
 * concurrent merge of the same keys whose version was removed, and insert its rows
 * twice. A replica knows only its own merges, so the rule rests on Lance's own check
 * instead of a bound on merge time: the fence is an update that matches no row, i.e.
 * an Update transaction without a key filter, which every key-checked merge-insert
 * committed after it conflicts with (Lance 12; measured, and test/lance/
 * cleanup-long-merge.test.ts holds it); such a merge runs again against the latest
 * version, inserting only absent keys, or fails and is retried as a publication. The
 * cleanup removes only versions below the fence (all that it keeps from `keepFrom` on
 * stays): whichever versions a merge that read before the fence misses, it cannot miss
 * the fence, and a later cleanup removes the fence only after committing its own.
 */
export async function commitCleanupFence(table: lancedb.Table, name: string): Promise<number> {
  const before = await table.version();
  let result: { rowsUpdated: number; version: number };
  try {
    // _offset is never negative (a Kafka offset): the update changes nothing and still commits.
    result = await table.update({
      where: `${OFFSET_COLUMN} < 0`,
      valuesSql: { [OFFSET_COLUMN]: OFFSET_COLUMN },
    });
  } catch (error) {
    if (isCommitConflict(error)) throw error;
    throw new CleanupFenceError(name, 'failed', error);
  }
  if (result.rowsUpdated !== 0 || result.version <= before) {
    throw new CleanupFenceError(
      name,
      `committed no new version (version ${result.version} after ${before}, ${result.rowsUpdated} rows updated)`,
    );
  }
  return before + 1;
}

/** Filters for the intervals, 64 a piece (one query each). */
/**
 * OR-filters (64 intervals each) selecting the rows of the intervals, of each interval's
 * incarnation only: the rows of a deleted incarnation of the topic share its (topic,
 * partition, offset) and must not count (they would make a publication look published,
 * or more than published). Rows with a null `_topic_id` were written before topic ids
 * (by an earlier version, or added with the column to an older table): they count as
 * the interval's incarnation, so that a replica upgraded mid-stream finds its
 * predecessor's rows (a topic recreated across the upgrade is then not told apart, as
 * on a broker without topic ids). A table without `_topic_id` holds only such rows.
 */
function intervalFilters(intervals: readonly OffsetIntervalFilter[], hasTopicId: boolean): string[] {
  const filters: string[] = [];
  for (let i = 0; i < intervals.length; i += 64) {
    filters.push(
      intervals
        .slice(i, i + 64)
        .map(
          (v) =>
            `(${intervalFilter(v)}${v.topicId === undefined || !hasTopicId ? '' : ` AND (${TOPIC_ID_COLUMN} = ${quote(v.topicId)} OR ${TOPIC_ID_COLUMN} IS NULL)`})`,
        )
        .join(' OR '),
    );
  }
  return filters;
}

/** The merge-insert key, and whether it is a table's key from before `_topic_id` (see #collides). */
interface InsertKey {
  readonly columns: string[];
  readonly legacy: boolean;
}

const quote = (text: string) => `'${text.replace(/'/g, "''")}'`;

function intervalFilter(v: { topic: string; partition: number; first: number; last: number }): string {
  return `${TOPIC_COLUMN} = ${quote(v.topic)} AND ${PARTITION_COLUMN} = ${v.partition} AND ${OFFSET_COLUMN} >= ${v.first} AND ${OFFSET_COLUMN} <= ${v.last}`;
}

/**
 * Rows in the intervals, of each interval's incarnation only: the rows of a deleted
 * incarnation of the topic share its (topic, partition, offset) and must not count
 * (they would make a publication look published, or more than published). A table
 * without `_topic_id` holds no row of any incarnation that has an id.
 */
async function countIntervals(
  table: lancedb.Table,
  intervals: readonly OffsetIntervalFilter[],
  hasTopicId: boolean,
): Promise<number> {
  let total = 0;
  for (const filter of intervalFilters(intervals, hasTopicId)) total += await table.countRows(filter);
  return total;
}

/**
 * One row's identity, the table's row key as one string: (_topic, _partition, _offset,
 * _row), `_row` 0 for a table (or staged data) without it, one row per record.
 */
export function rowKey(topic: string, partition: number, offset: number, row: number): string {
  return `${topic}\u0000${partition}\u0000${offset}\u0000${row}`;
}

/** A row key as people write it: topic[partition]@offset#row. */
export function describeRowKey(key: string): string {
  const [topic, partition, offset, row] = key.split('\u0000');
  return `${topic}[${partition}]@${offset}#${row}`;
}

async function keyCounts(
  table: lancedb.Table,
  intervals: readonly OffsetIntervalFilter[],
): Promise<Map<string, number>> {
  const fields = (await table.schema()).fields;
  const hasRow = fields.some((f) => f.name === ROW_COLUMN);
  const hasTopicId = fields.some((f) => f.name === TOPIC_ID_COLUMN);
  const columns = [TOPIC_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN, ...(hasRow ? [ROW_COLUMN] : [])];
  const counts = new Map<string, number>();
  for (const filter of intervalFilters(intervals, hasTopicId)) {
    const rows = (await table.query().where(filter).select(columns).toArray()) as {
      readonly _topic: string;
      readonly _partition: number;
      readonly _offset: bigint | number;
      readonly _row?: number | null;
    }[];
    for (const r of rows) {
      const key = rowKey(r._topic, r._partition, Number(r._offset), r._row ?? 0);
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
  }
  return counts;
}

/** Int32 staged into an Int64 column is cast by Lance; other differences are conflicts. */
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

/**
 * LanceDB's errors are untyped: this is the one place that reads their text. A
 * commit preempted by another writer (another replica, a compaction) is retried.
 */
function isCommitConflict(error: unknown): boolean {
  const text = error instanceof Error ? error.message : String(error);
  return /Retryable commit conflict|preempted by concurrent transaction|Commit conflict/i.test(text);
}

/** Lance's text for ENOSPC / EDQUOT (os error 28 / 122), or an injected one (test seam). */
function isDiskFullText(error: unknown): boolean {
  if ((error as { code?: unknown } | null)?.code === 'ENOSPC') return true;
  const text = error instanceof Error ? error.message : String(error);
  return /No space left on device|Disk quota exceeded|os error (28|122)\b/.test(text);
}

/** Lance refusing a schema (not a storage failure): the same data will be refused again. */
function isSchemaRejection(error: unknown): boolean {
  return /LanceError\(Schema\)/.test(error instanceof Error ? error.message : String(error));
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
 * `fn` again after a commit conflict, with backoff, up to `attempts` times; not once
 * `stopping` is aborted (a replica stopping does not wait for more attempts of
 * background work such as an index build).
 */
export async function retryConflicts<T>(
  fn: () => Promise<T>,
  attempts = 8,
  stopping?: AbortSignal,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    if (stopping?.aborted) throw new WorkStoppedError();
    try {
      return await fn();
    } catch (error) {
      if (!isCommitConflict(error) || attempt >= attempts || stopping?.aborted) throw error;
      await backoff(Math.min(2_000, 25 * 2 ** attempt) * (0.5 + Math.random()), stopping);
    }
  }
}

/** Background work asked to stop before an attempt began (not a failure of the store). */
export class WorkStoppedError extends Error {
  constructor() {
    super('stopped before the next attempt');
  }
}

/** Waits `ms`, or less when `stopping` aborts meanwhile. */
function backoff(ms: number, stopping: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      stopping?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    stopping?.addEventListener('abort', done, { once: true });
  });
}
