import type { Logger } from '../common/logger';
import { countedOutcome, finalWithoutCount, resolvedByReplay } from '../lance/commit-rule';
import type { LanceTable, WriteMode } from '../lance/lance-table';
import { rowKey } from '../lance/row-counts';
import { ROW_COLUMN, stagedColumns } from '../staging/system-columns';
import { crashPoint } from '../faults/crash-points';
import type { Plan, WritingRecord } from './ledger';
import type { PreparedPart } from './preparation';
import { CommitLostError, DuplicatedRowsError, PartialPublicationError } from './publication-errors';

/** Reads of a count that comes out low (see PublicationCheck.count), and the pause before the next. */
const COUNT_READS = 3;
const RECOUNT_DELAY_MS = 100;

/**
 * Whether a publication's rows are in the table: the count of its offset runs after an
 * add whose outcome Lance did not give (a rejected add, an insert-if-absent) and in
 * recovery of a `writing` record, judged by the commit rule (commit-rule.ts).
 */
export class PublicationCheck {
  constructor(
    private readonly lance: LanceTable,
    private readonly logger: Logger,
  ) {}

  /**
   * After the add: whether the publication's rows are in the table for good, as the
   * commit rule (commit-rule.ts) says: a fulfilled append is done without a look; a
   * rejected add or an insert-if-absent is counted once, and that count is final.
   */
  async afterAdd(
    plan: Plan,
    write: WriteMode,
    record: WritingRecord,
    addError: Error | undefined,
    keys: () => ReadonlySet<string>,
  ): Promise<'done'> {
    if (finalWithoutCount(write, addError !== undefined)) return 'done';
    // Not counted: retried from `writing`, which writes it again (commit-rule.ts).
    if (resolvedByReplay(write) && addError) throw addError;
    crashPoint('before-confirm');
    const found = await this.count(record);
    const outcome = countedOutcome(write, found, record.rows, { addFailed: addError !== undefined });
    if (outcome === 'in-table') {
      if (addError) {
        this.logger.warn(
          {
            event: 'publication.rejectedButCommitted',
            id: plan.id,
            rows: record.rows,
            err: addError.message,
          },
          'the add was rejected after its commit: all its rows are in the table; published',
        );
      }
      return 'done';
    }
    const table = this.lance.target.table;
    if (outcome === 'explain-surplus' && (await this.#explained(plan.id, record, found, keys))) return 'done';
    if (outcome === 'partial') throw new PartialPublicationError(plan.id, table, found, record.rows);
    // A rejected add that left nothing (or an insert not all in): retried from `writing`.
    if (addError) throw addError;
    throw new CommitLostError(plan.id, table, found, record.rows);
  }

  /**
   * The publication's rows in the table's newest version. A count on a listed version
   * can come out low: a LIST of `_versions/` can come back short and show an older
   * version (s3proxy's filesystem backend does so under concurrent PUTs), and an add
   * counted as absent is added again. So the newest version is found by number from a
   * version seen before the add (`fromVersion`, newest-by-number.ts), which no listing
   * can hide; a low count is still read again a little later on a new listing (a cleanup
   * can leave a gap that ends a walk early), and the highest count is the table's: a
   * committed version never goes away. (A record written before `fromVersion` was kept
   * is counted on the listed version the same way.)
   */
  async count(record: WritingRecord): Promise<number> {
    const { intervals, rows, fromVersion } = record;
    const count = () =>
      fromVersion === undefined
        ? this.lance.countRows(intervals)
        : this.lance.countRowsFrom(intervals, fromVersion);
    let found = await count();
    for (let read = 1; read < COUNT_READS && found < rows; read++) {
      await new Promise((r) => setTimeout(r, RECOUNT_DELAY_MS * read));
      found = Math.max(found, await count());
    }
    return found;
  }

  /**
   * An insert-if-absent publication whose offset runs hold more rows than it does, after
   * its write: done when the table explains the surplus, i.e. every row key of the
   * publication is present and no row key in its runs is held twice. The surplus rows are
   * then other rows of the same records (other `_row`s), published by an earlier owner
   * under a transform that emitted more rows per record: each record is in the table,
   * each row key once. A key held twice is a real duplicate (DuplicatedRowsError: the
   * table stops). A key of the publication absent means its write did not land: false,
   * and the caller treats it as any write that did not land.
   */
  async #explained(
    planId: string,
    record: WritingRecord,
    found: number,
    keys: () => ReadonlySet<string>,
  ): Promise<boolean> {
    const counts = await this.lance.rowKeyCounts(record.intervals, record.fromVersion);
    const table = this.lance.target.table;
    const duplicated = [...counts].filter(([, n]) => n > 1).map(([key]) => key);
    if (duplicated.length > 0) throw new DuplicatedRowsError(planId, table, found, record.rows, duplicated);
    for (const key of keys()) if (!counts.has(key)) return false;
    this.logger.warn(
      {
        event: 'publication.explained',
        id: planId,
        table,
        rows: record.rows,
        found,
        extraRows: found - record.rows,
      },
      'the table holds more rows of these records than this publication (an earlier transform emitted more rows per record): each of its row keys is there once; done',
    );
    return true;
  }
}

/** The row keys of a publication's prepared rows (`_row` 0 where the staged data has none). */
export function publicationKeys(prepared: readonly PreparedPart[]): Set<string> {
  const keys = new Set<string>();
  for (const part of prepared) {
    for (const batch of part.batches) {
      const reader = stagedColumns(batch);
      const row = batch.getChild(ROW_COLUMN);
      for (let i = 0; i < batch.numRows; i++) {
        const index: unknown = row?.get(i);
        keys.add(
          rowKey(
            reader.topic(i),
            reader.partition(i),
            reader.offset(i),
            typeof index === 'number' ? index : 0,
          ),
        );
      }
    }
  }
  return keys;
}
