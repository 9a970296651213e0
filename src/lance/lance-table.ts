import type * as lancedb from '@lancedb/lancedb';
import { Table as ArrowTable, type RecordBatch, type Schema } from 'apache-arrow';
import { injectedDiskFull } from '../faults/disk-full';
import { DiskFullError, errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import { schemaKeyOf, type SchemaKey } from '../staging/schema-key';
import { ROW_COLUMN, TOPIC_ID_COLUMN } from '../staging/system-columns';
import { appendArrowTable, takesArrowAdd } from './arrow-add';
import { retryConflicts } from './commit-retry';
import {
  LanceSchemaError,
  LanceWriteError,
  isLanceDiskFull,
  isMergeRefusal,
  isSchemaRejection,
} from './lance-errors';
import { connectTarget, type LanceTarget, type LentConnection, type SharedConnections } from './connect';
import { checkoutNewestFrom } from './newest-by-number';
import { countIntervals, keyCounts, type OffsetIntervalFilter } from './row-counts';
import { optimizeWithCleanup, type OptimizeOutcome } from './table-cleanup';
import { openTableConfirmed } from './open-if-committed';
import { RestoreDuty } from './restore-duty';
import { mergeNewest, type MergeOutcome } from './upsert-merge';
import { reduceToNewest, withTableColumns } from './upsert-reduce';
import { UpsertTableSize } from './upsert-table-size';
import {
  collidesWithOtherIncarnation,
  ensureInsertKey,
  ensureSystemIndexes,
  ensureTableSchema,
  ensureUpsertKey,
  type InsertKey,
} from './table-schema';

export type { LanceTarget } from './connect';

/**
 * How a publication's rows go in. `append`: one plain add (the ceiling rule keeps two
 * owners' rows apart). `insert-if-absent`: one merge-insert keyed on the table's
 * unenforced primary key (_topic, _partition, _offset[, _row]); Lance's conflict check
 * on inserted keys makes a concurrent or late insert of the same rows insert nothing
 * (DESIGN.md, "Commit after published"). `upsert`: the newest row per key, merged on the
 * table's key where the incoming position is newer (upsert-merge.ts), idempotent.
 */
export type WriteMode = 'append' | 'insert-if-absent' | 'upsert';

/** What one publication's write did. */
export interface Written {
  readonly rows: number;
  readonly version: number | undefined;
  readonly adds: number;
  /** An upsert's merge: what it changed and its seconds. */
  readonly merge?: MergeOutcome & { readonly seconds: number };
}

/** Runs between the assembly of a publication and its first add, given a version at or below the newest before it. */
export type BeforeAdd = (versionBefore: number) => Promise<void>;

/**
 * Judges the add (its error; undefined: the add resolved): resolves when its rows are in
 * the table for good (a rejected add can have committed), rejects otherwise. A lost add
 * is never added again here: the publisher retries it as a failed publication from
 * `writing`.
 */
export type AfterAdd = (addError: LanceWriteError | undefined) => Promise<void>;

/** One publication's rows for `LanceTable.append`, with the ledger's steps around the add. */
export interface AppendRequest {
  readonly batches: AsyncIterable<RecordBatch>;
  /** Runs between the assembly and the add (the ledger's `writing` step); absent: nothing. */
  readonly beforeAdd?: BeforeAdd;
  /** Absent: an add's error is thrown. */
  readonly afterAdd?: AfterAdd;
  /** Absent: 'append'. */
  readonly mode?: WriteMode;
  /** The batches' own IPC file, when the caller has one (asked for once all are in). */
  readonly ipcFile?: () => Uint8Array | undefined;
}

/**
 * One Lance table as kafka-lance uses it: created on first publication, its system
 * columns indexed at its first compaction (BTree on _offset, bitmaps on _partition and _topic_id), evolved by adding
 * nullable columns, appended to with exactly one `add` per publication (one Lance
 * commit), and counted by offset intervals to resolve an interrupted publication.
 * It stays an ordinary LanceDB table that Python or Rust readers open as is.
 */
export class LanceTable {
  #table: lancedb.Table | undefined;
  readonly #arrowAdd = new WeakMap<lancedb.Table, boolean>();
  /** Schema changes (create, indexes, new columns) one at a time in this process. */
  #schemaChanges: Promise<unknown> = Promise.resolve();
  /**
   * Adds one at a time in this process: two adds of one replica running at once would
   * commit the same version, which a store without put-if-absent lets one overwrite
   * (the commit rule, commit-rule.ts).
   */
  #adds: Promise<unknown> = Promise.resolve();
  /** The merge-insert key, once the table is known to carry it (insert-if-absent). */
  #insertKey: InsertKey | undefined;
  /** Rows a create landed over, owed back before the next write, count or compaction. */
  readonly #restore: RestoreDuty;
  /** Set once the table is seen with `_topic_id` (a column is never dropped). */
  #hasTopicId = false;
  /** Upsert tables: set once the table's primary key is seen to be the upsert key. */
  #upsertKeyChecked = false;
  #toastPlaceholders = false;
  readonly #upsertSize: UpsertTableSize;
  /** Gives a shared connection back (SharedConnections); undefined: the connection is this table's. */
  #release: (() => void) | undefined;
  /** The worker's connections (its own `as-opened` one too); undefined: this table makes its own. */
  #connections: SharedConnections | undefined;
  /** The schema (schemaKeyOf) the table was last readied for on this handle. */
  #ensuredSchema: SchemaKey | undefined;
  /** The worker's `as-opened` connection, borrowed by this table's first create or restore. */
  #own: Promise<LentConnection> | undefined;
  /** Set once this handle saw the system indexes in place (built or found). */
  #systemIndexesSeen = false;

  private constructor(
    readonly target: LanceTarget,
    private readonly db: lancedb.Connection,
    private readonly logger: Logger,
    restoreIntent: string | undefined,
    /** Upsert mode: the key's columns (the table's primary key and merge key). */
    readonly upsertKey: readonly string[] | undefined,
  ) {
    this.#restore = new RestoreDuty(
      {
        target,
        live: db,
        current: () => this.#current(),
        connectOwn: () => this.#connectOwn(),
        logger,
      },
      restoreIntent,
    );
    this.#upsertSize = new UpsertTableSize(target.table, logger);
  }

  /**
   * `restoreIntent`: the file, in this replica's own data directory, where the duty to
   * put back rows a create landed over outlives the process (restore-intent.ts). Without
   * it, a process killed before its restore leaves them out.
   */
  static async connect(
    target: LanceTarget,
    logger: Logger,
    options: {
      readonly restoreIntent?: string;
      readonly upsertKey?: readonly string[] | undefined;
      /** Upsert mode: values may be Debezium's TOAST placeholder (a debezium envelope; default false: a value is a value). */
      readonly toastPlaceholders?: boolean;
      /** The worker's connections, shared by its tables; absent: this table's own. */
      readonly connections?: SharedConnections;
    } = {},
  ): Promise<LanceTable> {
    const lent = options.connections
      ? await options.connections.acquire(target, 'latest')
      : { db: await connectTarget(target, 'latest'), release: undefined };
    // The table is opened lazily: a storage failure shows up in a publication (retried), not at start.
    const table = new LanceTable(target, lent.db, logger, options.restoreIntent, options.upsertKey);
    table.#release = lent.release;
    table.#connections = options.connections;
    table.#toastPlaceholders = options.toastPlaceholders ?? false;
    return table;
  }

  /**
   * The table, once it exists (created by this or another replica). A listing that
   * lacks it is confirmed by opening it: a LIST can come back short under concurrent
   * writes (s3proxy's filesystem backend), and a table taken for absent is created,
   * which Lance commits over the existing one (table-creation.ts). A table listed but
   * without a committed version is absent too (openTableConfirmed).
   */
  async #current(): Promise<lancedb.Table | undefined> {
    if (this.#table) return this.#table;
    this.#table = await openTableConfirmed(this.db, this.target.table);
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
    await this.#restore.finish();
    const key = schemaKeyOf(schema);
    // This handle already created the table for, or added the columns of, the same schema:
    // nothing to read again (a publication's schema read was one of its few Lance calls, and
    // 200 tables make ~10× the publications of one). Columns are only ever added; a failed
    // write forgets it (#writeError), so a table changed behind our back is read again.
    if (this.#table && this.#ensuredSchema === key) return;
    const hooks = this.#restore.aroundCreate();
    this.#table = await ensureTableSchema(
      this.db,
      await this.#current(),
      this.target.table,
      this.target.uri,
      schema,
      this.logger,
      () => this.#connectOwn(),
      hooks,
      this.upsertKey,
    );
    this.#ensuredSchema = key;
  }

  /** The restore duty's `finish()` in turn with schema changes, for the counts and compaction. */
  #restored(): Promise<void> {
    if (this.#restore.settled) return Promise.resolve();
    const run = this.#schemaChanges.then(() => retryConflicts(() => this.#restore.finish()));
    this.#schemaChanges = run.catch(() => undefined);
    return run;
  }

  /**
   * The table, for a count that starts from version `from` of it. A version this process
   * saw (from ≥ 1) proves the table exists: one that a listing or an open misses now is
   * a short listing of the store, and a count of 0 would have a committed publication
   * added again, so it is a retriable failure instead.
   */
  async #countable(from: number | undefined): Promise<lancedb.Table | undefined> {
    await this.#restored();
    const table = await this.#current();
    if (!table && from !== undefined && from >= 1)
      throw new LanceWriteError(
        `version ${from} of the table was seen, but the store does not show the table now`,
        undefined,
        true,
        this.target.table,
      );
    return table;
  }

  /**
   * A connection that never reloads: a table's handle keeps the version its create
   * committed (each handle holds its own version, so the worker's one such connection
   * serves every table; a connection made and closed per table created cost ~10 ms of
   * the worker's thread each with 200 tables).
   */
  async #connectOwn(): Promise<LentConnection> {
    if (!this.#connections) {
      const db = await connectTarget(this.target, 'as-opened');
      return { db, release: () => db.close() };
    }
    // Borrowed once and kept until close: released after each use, the worker's last
    // borrower would close it every time.
    this.#own ??= this.#connections.acquire(this.target, 'as-opened');
    const own = this.#own;
    try {
      return { db: (await own).db, release: () => undefined };
    } catch (error) {
      if (this.#own === own) this.#own = undefined;
      throw error;
    }
  }

  /**
   * The writer side of a publication. LanceDB 0.39's `add` takes a whole Arrow table
   * (no streaming add), so batches are assembled first; `beforeAdd` runs between
   * the assembly and the `add` (the ledger's `writing` step). Kept behind an
   * AsyncIterable so a streaming add can replace the assembly later.
   *
   * `afterAdd` decides whether the rows are in the table for good (a rejected add can
   * have committed, so the caller may count them).
   */
  async append(request: AppendRequest): Promise<Written> {
    const { batches, beforeAdd = () => Promise.resolve(), mode = 'append', ipcFile } = request;
    const afterAdd: AfterAdd = request.afterAdd ?? ((e) => (e ? Promise.reject(e) : Promise.resolve()));
    const collected: RecordBatch[] = [];
    for await (const b of batches) collected.push(b);
    if (collected.length > 0) await this.ensureSchema(collected[0]!.schema);
    const rows = collected.reduce((n, b) => n + b.numRows, 0);
    const existing = rows === 0 ? undefined : this.#required();
    // A version at or below the newest before the add: where a count of its outcome
    // starts reading versions by number (countRowsFrom).
    await beforeAdd(existing ? await existing.version() : 0);
    if (!existing) return { rows, version: undefined, adds: 0 };
    const table = existing;
    if (mode === 'upsert') return this.#upsert(table, collected, rows, afterAdd);
    const arrowTable = new ArrowTable(collected);
    const key = mode === 'insert-if-absent' ? await this.#ensureInsertKey(table) : undefined;
    let on = key?.columns;
    if (key?.legacy && (await collidesWithOtherIncarnation(table, collected))) {
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
    const direct = await this.#takesArrowAdd(table);
    // The batches' own IPC file, when the caller has one (asked for once all are in).
    const file = direct && !on ? ipcFile?.() : undefined;
    const write = async () => {
      if (!on) return appendArrowTable(table, file ?? arrowTable, direct);
      // useIndex(false): the scan join is the path whose inserted keys Lance checks
      // against concurrent merge-inserts (measured; with a single indexed key column
      // four concurrent merges of the same rows all inserted them).
      return table.mergeInsert(on).whenNotMatchedInsertAll().useIndex(false).execute(arrowTable);
    };
    let version: number | undefined;
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
      version = result.version;
    } catch (error) {
      addError = this.#writeError(error);
    }
    await afterAdd(addError);
    return { rows, version, adds: 1 };
  }

  /**
   * An upsert publication: reduced to the newest row per key, then one merge (upsert-merge.ts),
   * retried on a commit conflict and serialized with this process's other writes like an add.
   * A merge that fails is for `afterAdd` to judge (the publication is written again from
   * `writing`: the merge is idempotent).
   */
  async #upsert(
    table: lancedb.Table,
    collected: readonly RecordBatch[],
    rows: number,
    afterAdd: AfterAdd,
  ): Promise<Written> {
    const key = this.upsertKey;
    if (!key) throw new Error(`an upsert into ${this.target.table} without a key`);
    if (!this.#upsertKeyChecked) {
      await ensureUpsertKey(table, key, this.target.table);
      this.#upsertKeyChecked = true;
    }
    const newest = reduceToNewest(collected, key, this.#toastPlaceholders);
    const hasRow = collected[0]!.schema.fields.some((f) => f.name === ROW_COLUMN);
    let addError: LanceWriteError | undefined;
    let merge: (MergeOutcome & { seconds: number }) | undefined;
    try {
      const t0 = performance.now();
      const run = this.#adds.then(() =>
        retryConflicts(async () => {
          const injected = injectedDiskFull('lance', this.target.uri);
          if (injected) throw injected;
          // Widened to the table's columns on every attempt: the conflict being retried
          // may be another replica's commit that added a column, which this merge must
          // set null rather than leave the older record's value in (withTableColumns).
          const reduced = withTableColumns(newest, await table.schema());
          return mergeNewest(table, key, reduced, hasRow);
        }),
      );
      this.#adds = run.catch(() => undefined);
      const outcome = await run;
      merge = { ...outcome, seconds: (performance.now() - t0) / 1000 };
      // Only a warning: a failed count must not fail a merge that landed.
      await this.#upsertSize.merged(table, outcome.inserted).catch(() => undefined);
    } catch (error) {
      addError = this.#writeError(error);
    }
    await afterAdd(addError);
    return { rows, version: merge?.version, adds: 1, ...(merge ? { merge } : {}) };
  }

  /** A write's failure as the publisher classifies it: a schema refusal, a full disk, or a retriable write error. */
  #writeError(error: unknown): LanceWriteError {
    this.#ensuredSchema = undefined;
    if (isMergeRefusal(error))
      throw new LanceSchemaError(
        'rejected',
        this.target.table,
        `merge refused: ${errorMessage(error)}`,
        {},
        error,
      );
    if (isSchemaRejection(error))
      throw new LanceSchemaError(
        'rejected',
        this.target.table,
        `add refused: ${errorMessage(error)}`,
        {},
        error,
      );
    // A full disk is named as such (never a reason to set the plan aside): see failure.ts.
    const cause = isLanceDiskFull(error) ? new DiskFullError('lance', this.target.uri, 'add', error) : error;
    return new LanceWriteError('add failed', cause, true, this.target.table);
  }

  /** Whether appends to this handle skip LanceDB's extra copy (arrow-add.ts): one schema read per handle. */
  async #takesArrowAdd(table: lancedb.Table): Promise<boolean> {
    let direct = this.#arrowAdd.get(table);
    if (direct === undefined) this.#arrowAdd.set(table, (direct = await takesArrowAdd(table)));
    return direct;
  }

  /** The merge-insert key (table-schema.ts), read once per process: a key never changes once set. */
  async #ensureInsertKey(table: lancedb.Table): Promise<InsertKey> {
    this.#insertKey ??= await ensureInsertKey(table, this.target.table, this.logger);
    return this.#insertKey;
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
    const table = await this.#countable(from);
    if (!table) return new Map();
    if (from === undefined) return keyCounts(table, intervals);
    // On the newest version by number, as the count it explains (countRowsFrom).
    return this.#onNewestFrom(from, (probe) => keyCounts(probe, intervals));
  }

  /** Rows whose (topic, partition, offset) fall in the intervals. */
  async countRows(intervals: readonly OffsetIntervalFilter[]): Promise<number> {
    const table = intervals.length === 0 ? undefined : await this.#countable(undefined);
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
    if (intervals.length === 0 || !(await this.#countable(from))) return 0;
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
   * Compaction, index update and version cleanup below a cleanup fence
   * (`optimizeWithCleanup`, table-cleanup.ts); undefined when the table does not exist yet.
   */
  async optimize(cleanupOlderThanMs = 0, now = Date.now()): Promise<OptimizeOutcome | undefined> {
    // A pending restore first: the cleanup would remove the version its rows are read from.
    await this.#restored();
    const table = await this.#current();
    if (!table) return undefined;
    await this.#systemIndexed(table);
    return optimizeWithCleanup(table, this.target.table, cleanupOlderThanMs, now);
  }

  /**
   * The system indexes (ensureSystemIndexes), built by the table's first compaction on this
   * handle, not at its create: until a compaction folds rows in, an index built on the
   * empty table covers none of them anyway. Looked for once per handle (a replica started
   * on a table created before this, or indexed by another replica, finds them).
   */
  async #systemIndexed(table: lancedb.Table): Promise<void> {
    if (this.#systemIndexesSeen) return;
    const run = this.#schemaChanges.then(() =>
      retryConflicts(() => ensureSystemIndexes(table, this.upsertKey)),
    );
    this.#schemaChanges = run.catch(() => undefined);
    await run;
    this.#systemIndexesSeen = true;
  }

  /**
   * Releases the native handles. LanceDB refuses to close a handle while a call on it is
   * still in flight ("cannot be borrowed mutably"); the caller is then already on a
   * failure or shutdown path, and that error would hide the one that matters, so the
   * handle is left to the garbage collector instead.
   */
  close(): void {
    for (const handle of [this.#table, ...(this.#release ? [] : [this.db])]) {
      try {
        handle?.close();
      } catch {
        // in flight: freed when collected
      }
    }
    this.#release?.();
    void this.#own?.then(
      (own) => own.release(),
      () => undefined,
    );
  }

  #required(): lancedb.Table {
    if (!this.#table) throw new Error(`Lance table ${this.target.table} is not created yet`);
    return this.#table;
  }
}
