import type * as lancedb from '@lancedb/lancedb';
import type { DataType, Schema } from 'apache-arrow';
import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import { crashPoint } from '../faults/crash-points';
import type { LanceTarget, LentConnection } from './connect';
import { LanceSchemaError, LanceWriteError, isMissingVersion } from './lance-errors';
import { openTableConfirmed } from './open-if-committed';
import { RestoreIntentFile } from './restore-intent';
import { findOverwrite, restorableAs, restoreOverwrittenRows } from './table-creation';
import { addMissingColumns, ensureInsertKey, ensureSystemIndexes, type CreateHooks } from './table-schema';

/**
 * Readies the live table for rows a create landed over, read with `source`: the columns
 * they have and it lacks, then the row key they are put back on (returned). A number
 * column the table has widened takes them (`restorableAs`).
 */
export async function readyForRestore(
  table: lancedb.Table,
  name: string,
  source: Schema,
  logger: Logger,
): Promise<readonly string[]> {
  await addMissingColumns(table, name, source, logger, (existing, rows) =>
    restorableAs(existing.type as DataType, rows.type as DataType),
  );
  return (await ensureInsertKey(table, name, logger)).columns;
}

/** What a table's restore duty works on: the table's live connection and handle, and its own connections. */
export interface RestoreDutyTable {
  readonly target: LanceTarget;
  /** The connection every read of the table goes through (reads the latest version). */
  readonly live: lancedb.Connection;
  /** The table on `live`, once it exists. */
  readonly current: () => Promise<lancedb.Table | undefined>;
  /** A connection that never reloads: a table's handle keeps the version its create committed. */
  readonly connectOwn: () => Promise<LentConnection>;
  readonly logger: Logger;
}

/**
 * The duty to put back the rows a create of the table landed over (table-creation.ts),
 * from the moment a create may land over the table until the rows are back. A create
 * this process made reports its version; one a process before it made is known from
 * the intent file it left (restore-intent.ts), or, when that process died before it
 * knew its version, found among the versions committed since the intent was written.
 *
 * `finish()` runs before anything else is written or counted: without the overwritten
 * rows, a count would miss publications that are in the table for good, and they would
 * be added again beside the rows the restore puts back. The system indexes the
 * overwrite dropped are built again after it.
 */
export class RestoreDuty {
  /** Where the duty outlives this process; read at the first `finish()`. */
  readonly #intent: RestoreIntentFile | undefined;
  #intentRead = false;
  /** The version of a create that landed over rows, while their restore has not succeeded. */
  #createdOver: number | undefined;
  /** When an intent whose create's version is not known was written, until the table is seen. */
  #pendingSince: number | undefined;
  /** The system indexes, once an overwrite dropped them, until they are built again. */
  #indexesOwed = false;

  /** `intentFile`: in this replica's own data directory. Without it, a process killed before its restore leaves the rows out. */
  constructor(
    private readonly table: RestoreDutyTable,
    intentFile: string | undefined,
  ) {
    this.#intent = intentFile === undefined ? undefined : new RestoreIntentFile(intentFile);
  }

  /** Nothing owed: `finish()` would do nothing. */
  get settled(): boolean {
    return (
      this.#intentRead &&
      this.#createdOver === undefined &&
      this.#pendingSince === undefined &&
      !this.#indexesOwed
    );
  }

  /** Finishes what is owed (see the class): a restore that failed, or one a previous process left. */
  async finish(): Promise<void> {
    if (!this.#intentRead) {
      await this.#readIntent();
      this.#intentRead = true;
    }
    if (this.#pendingSince !== undefined)
      this.#createdOver ??= await this.#lookForOverwrite(this.#pendingSince);
    if (this.#createdOver !== undefined) {
      this.#indexesOwed = true;
      await this.#restore(this.#createdOver);
    }
    if (!this.#indexesOwed) return;
    const table = await this.table.current();
    if (!table) return;
    await ensureSystemIndexes(table);
    this.#indexesOwed = false;
  }

  /** The hooks around one create of the table (ensureTableSchema): the duty is written down before it. */
  aroundCreate(): CreateHooks {
    let since = Date.now();
    let inherited = false;
    return {
      beforeCreate: async () => {
        // An intent not resolved yet (its table not seen) keeps its time: the overwrite
        // it stands for may lie below this create.
        inherited = this.#pendingSince !== undefined;
        since = this.#pendingSince ?? since;
        await this.#writeIntent(undefined, since);
        // Looked for again at the next write or count if the create fails: it may have committed.
        this.#pendingSince = since;
      },
      created: async (creation) => {
        if (creation.overwrittenRows !== 0) {
          // An inherited duty stays pending beside this one, even if this restore fails.
          this.#pendingSince = inherited ? since : undefined;
          await this.#restore(creation.version);
          if (inherited) await this.#writeIntent(undefined, since);
        } else if (!inherited) {
          this.#pendingSince = undefined;
          await this.#intent?.clear();
        }
      },
    };
  }

  #writeIntent(version: number | undefined, writtenAt = Date.now()): Promise<void> | undefined {
    const { uri, table } = this.table.target;
    return this.#intent?.write({ uri, table, version, writtenAt });
  }

  /** The intent a previous process left: its version to restore, or the time to look from. */
  async #readIntent(): Promise<void> {
    const intent = await this.#intent?.read();
    if (!intent) return;
    const { target, logger } = this.table;
    if (intent.uri !== target.uri || intent.table !== target.table) {
      logger.warn(
        { event: 'lance.table.restoreIntentDropped', table: target.table, intent },
        'a restore intent of another table (lance.uri or the table changed) is dropped',
      );
      await this.#intent?.clear();
      return;
    }
    if (intent.version !== undefined) this.#createdOver ??= intent.version;
    else this.#pendingSince = intent.writtenAt;
  }

  /**
   * The version a create whose version is not known (its process died, or its create
   * failed after it may have committed) landed over: the overwrite found among the
   * versions committed since `since`. A table not seen keeps the duty pending (a listing
   * can come back short): it is looked for again at the next write or count.
   */
  async #lookForOverwrite(since: number): Promise<number | undefined> {
    const { target, logger } = this.table;
    const own = await this.table.connectOwn();
    try {
      const table = await openTableConfirmed(own.db, target.table);
      if (!table) return undefined;
      const found = await findOverwrite(table, since).finally(() => table.close());
      this.#pendingSince = undefined;
      if (found.kind === 'found') {
        logger.warn(
          { event: 'lance.table.createdOverFound', table: target.table, version: found.version },
          'a create whose version was not known landed over the table: putting the rows back',
        );
        return found.version;
      }
      if (found.kind === 'gone') this.#impossible(found.version, 'its previous version was cleaned up');
      await this.#intent?.clear();
      return undefined;
    } finally {
      own.release();
    }
  }

  #impossible(version: number, why: string): void {
    this.table.logger.error(
      { event: 'lance.table.restoreImpossible', table: this.table.target.table, version, why },
      'the rows a create landed over cannot be put back: they are missing from the table',
    );
  }

  /**
   * Puts back the rows a create at `version` landed over; remembered until it succeeds.
   * Its failures are the table's, not the publication's that ran into it: a schema
   * problem between the overwritten rows and the table is a retriable LanceWriteError
   * here, never a LanceSchemaError, which would set that publication aside.
   */
  async #restore(version: number): Promise<void> {
    const { target, live, logger } = this.table;
    this.#createdOver = version;
    await this.#writeIntent(version);
    crashPoint('before-restore');
    try {
      await restoreOverwrittenRows(
        () => this.table.connectOwn(),
        live,
        target.table,
        version,
        (t, source) => readyForRestore(t, target.table, source, logger),
        logger,
      );
    } catch (error) {
      if (isMissingVersion(error, version - 1) || isMissingVersion(error, version)) {
        // Read by number, never through a listing: that version is gone, and its rows with it.
        this.#impossible(version, errorMessage(error));
        await this.#intent?.clear();
        this.#createdOver = undefined;
        return;
      }
      logger.warn(
        {
          event: 'lance.table.restoreFailed',
          table: target.table,
          version,
          intent: this.#intent?.file,
          err: errorMessage(error),
        },
        'the rows a create landed over could not be put back yet: tried again before the next write or count (removing the intent file gives them up)',
      );
      if (!(error instanceof LanceSchemaError)) throw error;
      throw new LanceWriteError(
        `the rows version ${version - 1} held before a create landed over it cannot be put back: ${error.message}${
          this.#intent ? ` (this duty is kept in ${this.#intent.file}: removing it gives those rows up)` : ''
        }`,
        error,
        true,
        target.table,
      );
    }
    await this.#intent?.clear();
    this.#createdOver = undefined;
  }
}
