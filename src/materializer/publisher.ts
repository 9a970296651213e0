import { promises as fsp } from 'node:fs';
import type { RecordBatch } from 'apache-arrow';
import type { BoundedBudget } from '../common/bounded-budget';
import { KafkaLanceError, asError } from '../common/errors';
import { fsyncDirectory, pathExists } from '../common/fs-durable';
import type { Logger } from '../common/logger';
import { countedOutcome, finalWithoutCount } from '../lance/commit-rule';
import type { LanceTable, WriteMode } from '../lance/lance-table';
import { describeRowKey, rowKey } from '../lance/row-counts';
import { ROW_COLUMN, stagedColumns } from '../staging/system-columns';
import * as path from 'node:path';
import { crashPoint } from './crash-points';
import { keptBounds } from './keep-range';
import { ledger, type LedgerEntry, type OffsetInterval, type Plan, type WritingRecord } from './plan';
import { preparePart, type PreparationContext, type PreparedPart } from './preparation';

export type PreparationMode = 'buffered' | 'streamed';

export interface PublicationResult {
  readonly id: string;
  readonly rows: number;
  readonly bytes: number;
  readonly prepareSeconds: number;
  readonly writeSeconds: number;
  /** Seconds the writer waited for source data (streamed) or for the whole preparation (buffered). */
  readonly sourceWaitSeconds: number;
  /** Seconds spent counting the publication's rows after its add (a rejected add, an insert-if-absent), in writeSeconds. */
  readonly checkSeconds: number;
  /** Adds made (1; 0 for a publication found in the table by recovery). */
  readonly adds: number;
}

/** A publication whose descriptors do not add up to its plan: nothing was written. */
export class PublicationMismatchError extends KafkaLanceError {
  constructor(planId: string, detail: string) {
    super('PUBLICATION_MISMATCH', `publication ${planId}: ${detail}`, { context: { planId } });
  }
}

/**
 * An insert-if-absent that resolved, yet the table lacks some of its row keys: a
 * commit lost on a store that was taken for atomic. The publication stays `writing`
 * and is retried (its next write inserts only the absent keys).
 */
export class CommitLostError extends KafkaLanceError {
  constructor(planId: string, table: string, found: number, rows: number) {
    super(
      'LANCE_WRITE_FAILED',
      `publication ${planId}: the write resolved but table ${table} holds ${found} of its ${rows} rows (a commit was lost)`,
      { retriable: true, context: { planId, table, found, rows } },
    );
  }
}

/** A publication found half in the table after a crash: it cannot be resolved without a human. */
export class PartialPublicationError extends KafkaLanceError {
  constructor(
    planId: string,
    table: string,
    found: number,
    expected: number,
    message = `table ${table} holds ${found} of the ${expected} rows of publication ${planId}; a Lance add is atomic, so this is not ours to repair: stopping the table`,
    context: Readonly<Record<string, unknown>> = {},
  ) {
    super('PUBLICATION_PARTIAL', message, { context: { planId, table, found, expected, ...context } });
  }
}

/**
 * A row key (_topic, _partition, _offset[, _row]) the table holds more than once in a
 * publication's offset runs: a real duplicate, which no earlier owner or transform
 * explains. It stops the table like a partial publication.
 */
export class DuplicatedRowsError extends PartialPublicationError {
  constructor(planId: string, table: string, found: number, expected: number, duplicated: readonly string[]) {
    const examples = duplicated.slice(0, 5).map(describeRowKey);
    super(
      planId,
      table,
      found,
      expected,
      `table ${table} holds ${duplicated.length} row key(s) of publication ${planId} twice or more (${examples.join(', ')}${duplicated.length > examples.length ? ', ...' : ''}): rows were inserted twice; stopping the table`,
      { duplicatedKeys: duplicated.length, examples },
    );
  }
}

export interface PublisherOptions {
  readonly tableDir: string;
  readonly lance: LanceTable;
  readonly preparation: PreparationContext;
  readonly reservation: BoundedBudget;
  readonly logger: Logger;
  /** 'insert-if-absent' in 'published' commit mode (another owner may hold some of the rows); default 'append'. */
  readonly write?: WriteMode;
}

/**
 * Runs one plan to its single Lance commit: prepare every part (permits and source
 * reservation), check the descriptors against the plan, mark `writing` (with the
 * exact offset intervals), one `add`, mark `published`, then delete the sources.
 * Buffered and streamed preparation share all of it but the hand-over of batches.
 */
export class Publisher {
  constructor(private readonly o: PublisherOptions) {}

  async publish(plan: Plan, mode: PreparationMode): Promise<PublicationResult> {
    const started = performance.now();
    // The whole publication's source bytes (fetched + decoded, ~2× the parts) in one
    // request, held until the add ends: Lance takes the publication as one table, so
    // every part stays in memory until then. Per-part requests waited on each other
    // when the publication did not fit (a deadlock); one request larger than the whole
    // budget is admitted once nothing else holds any, so it runs alone instead.
    const reserved = reservationFor(plan);
    await this.o.reservation.acquire(0, reserved);
    const tasks = plan.parts.map((part) => preparePart(part, this.o.preparation));
    // Every admitted task finishes (the reservation stays held until then) before a
    // failure is returned: settle() waits for all of them, once.
    const prepared: PreparedPart[] = [];
    let firstError: unknown;
    let settling: Promise<void> | undefined;
    const settle = () =>
      (settling ??= Promise.allSettled(tasks).then((results) => {
        for (const r of results) {
          if (r.status === 'fulfilled') prepared.push(r.value);
          else firstError ??= r.reason;
        }
      }));
    let sourceWait = 0;
    let preparedAt = 0;
    let written: { rows: number; version: number | undefined; adds: number };
    let checkSeconds = 0;
    try {
      if (mode === 'buffered') {
        const t0 = performance.now();
        await settle();
        sourceWait = (performance.now() - t0) / 1000;
        if (firstError !== undefined) throw asError(firstError);
      }
      const source = this.#batches(tasks, mode, (s) => (sourceWait += s));
      let record: WritingRecord | undefined;
      written = await this.o.lance.append(
        source,
        async (versionBefore) => {
          await settle();
          if (firstError !== undefined) throw asError(firstError);
          preparedAt = performance.now();
          record = { ...this.#verify(plan, prepared), fromVersion: versionBefore };
          await ledger.markWriting(this.o.tableDir, record);
          crashPoint('before-add');
        },
        async (addError) => {
          const t0 = performance.now();
          try {
            return await this.#afterAdd(plan, record!, addError, () => publicationKeys(prepared));
          } finally {
            checkSeconds += (performance.now() - t0) / 1000;
          }
        },
        this.#writeOf(plan),
      );
      crashPoint('after-add');
    } finally {
      // The batches are in Lance (or the publication failed): the source reservation goes back.
      await settle();
      this.o.reservation.release(0, reserved);
    }
    await ledger.markPublished(this.o.tableDir, plan.id, written.version);
    crashPoint('after-published');
    await this.#cleanup(plan);
    const done = performance.now();
    return {
      id: plan.id,
      rows: written.rows,
      bytes: plan.bytes,
      prepareSeconds: ((preparedAt || done) - started) / 1000,
      writeSeconds: (done - (preparedAt || done)) / 1000,
      sourceWaitSeconds: sourceWait,
      checkSeconds,
      adds: written.adds,
    };
  }

  /**
   * After the add: whether the publication's rows are in the table for good, as the
   * commit rule (commit-rule.ts) says: a fulfilled append is done without a look; a
   * rejected add or an insert-if-absent is counted once, and that count is final.
   */
  async #afterAdd(
    plan: Plan,
    record: WritingRecord,
    addError: Error | undefined,
    keys: () => ReadonlySet<string>,
  ): Promise<'done'> {
    const write = this.#writeOf(plan);
    if (finalWithoutCount(write, addError !== undefined)) return 'done';
    crashPoint('before-confirm');
    const found = await this.#count(record);
    const outcome = countedOutcome(write, found, record.rows, { addFailed: addError !== undefined });
    if (outcome === 'in-table') {
      if (addError) {
        this.o.logger.warn(
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
    const table = this.o.lance.target.table;
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
  async #count(record: WritingRecord): Promise<number> {
    const { intervals, rows, fromVersion } = record;
    const count = () =>
      fromVersion === undefined
        ? this.o.lance.countRows(intervals)
        : this.o.lance.countRowsFrom(intervals, fromVersion);
    let found = await count();
    for (let read = 1; read < COUNT_READS && found < rows; read++) {
      await new Promise((r) => setTimeout(r, RECOUNT_DELAY_MS * read));
      found = Math.max(found, await count());
    }
    return found;
  }

  /**
   * Finishes one ledger entry a crash or a failure left (never one being quarantined:
   * the caller finishes those). No plan left → a cleanup was cut short after its
   * sources went: forget the rest; `published` → delete leftover sources; `writing`
   * → the table decides: all its rows there → published, none → write again, some →
   * stop (PartialPublicationError), except for an insert-if-absent publication, which is
   * written again (only absent keys go in; the check after that write tells a surplus the
   * table explains from a duplicate); a plan alone → publish it, unless every source is
   * gone (only a cleanup deletes sources: an older cleanup order removed `published`
   * before the plan).
   */
  async resumeOne(entry: LedgerEntry, mode: PreparationMode): Promise<PublicationResult | 'finished'> {
    const { plan, writing } = entry;
    if (!plan) {
      await ledger.forget(this.o.tableDir, entry.id);
      return 'finished';
    }
    let done = entry.published;
    if (!done && writing) {
      // The same rule as after a rejected add: one count, final.
      const t0 = performance.now();
      const found = await this.#count(writing);
      const outcome = countedOutcome(this.#writeOf(plan), found, writing.rows, undefined);
      if (outcome === 'in-table') {
        await ledger.markPublished(this.o.tableDir, plan.id, undefined);
        await this.#cleanup(plan);
        // Its rows are published now (an add whose answer was lost, or a kill after it):
        // reported like any publication, so the published-rows metrics add up.
        const checkSeconds = (performance.now() - t0) / 1000;
        return {
          id: plan.id,
          rows: writing.rows,
          bytes: plan.bytes,
          prepareSeconds: 0,
          writeSeconds: checkSeconds,
          sourceWaitSeconds: 0,
          checkSeconds,
          adds: 0,
        };
      } else if (outcome === 'partial') {
        throw new PartialPublicationError(plan.id, this.o.lance.target.table, found, writing.rows);
      }
    } else if (!done && plan.parts.length > 0 && (await allMissing(plan.parts.map((p) => p.path)))) {
      // Nothing left to publish from. Its offset span in the table (an upper bound: it may
      // hold other publications' rows) tells a cleanup cut short from sources lost otherwise.
      const found = await this.o.lance.countRows(spanOf(plan));
      const lost = found === 0 && plan.rows > 0;
      this.o.logger[lost ? 'error' : 'warn'](
        {
          event: 'publication.resume.sourcesGone',
          id: plan.id,
          parts: plan.parts.length,
          rows: plan.rows,
          found,
        },
        lost
          ? 'a plan whose sources are gone and whose rows are not in the table: nothing left to publish; forgetting it'
          : 'a plan whose cleanup was cut short after its sources went: it was published; forgetting it',
      );
      done = true;
    }
    if (done) {
      await this.#cleanup(plan);
      return 'finished';
    }
    this.o.logger.info({ event: 'publication.resume', id: plan.id }, 'publishing an interrupted plan again');
    return this.publish(plan, mode);
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
    const counts = await this.o.lance.rowKeyCounts(record.intervals, record.fromVersion);
    const table = this.o.lance.target.table;
    const duplicated = [...counts].filter(([, n]) => n > 1).map(([key]) => key);
    if (duplicated.length > 0) throw new DuplicatedRowsError(planId, table, found, record.rows, duplicated);
    for (const key of keys()) if (!counts.has(key)) return false;
    this.o.logger.warn(
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

  /** A plan of an epoch the chain dropped is insert-if-absent whatever the replica's mode. */
  #writeOf(plan: Plan): WriteMode {
    return plan.write === 'insert-if-absent' ? plan.write : (this.o.write ?? 'append');
  }

  #verify(plan: Plan, prepared: readonly PreparedPart[]): WritingRecord {
    if (prepared.length !== plan.parts.length) {
      throw new PublicationMismatchError(
        plan.id,
        `${prepared.length} descriptors for ${plan.parts.length} parts`,
      );
    }
    const byPath = new Map(prepared.map((p) => [p.descriptor.path, p.descriptor]));
    let rows = 0;
    for (const part of plan.parts) {
      const d = byPath.get(part.path);
      if (!d) throw new PublicationMismatchError(plan.id, `no descriptor for ${part.path}`);
      if (d.checksum !== part.checksum)
        throw new PublicationMismatchError(plan.id, `checksum of ${part.path} differs`);
      if (d.rows !== part.keptRows) {
        throw new PublicationMismatchError(
          plan.id,
          `${part.path}: ${d.rows} rows prepared, plan keeps ${part.keptRows}`,
        );
      }
      rows += d.rows;
    }
    if (rows !== plan.rows)
      throw new PublicationMismatchError(plan.id, `${rows} rows prepared, plan has ${plan.rows}`);
    return { id: plan.id, rows, intervals: prepared.flatMap((p) => p.descriptor.intervals) };
  }

  /** Batches in plan order (buffered: all ready) or as each part becomes ready (streamed). */
  async *#batches(
    tasks: readonly Promise<PreparedPart>[],
    mode: PreparationMode,
    waited: (seconds: number) => void,
  ): AsyncGenerator<RecordBatch> {
    for (const task of tasks) {
      const t0 = performance.now();
      const part = await task;
      if (mode === 'streamed') waited((performance.now() - t0) / 1000);
      yield* part.batches;
    }
  }

  /** Sources first (only after `published` is durable), durably, then the ledger (see ledger.forget). */
  async #cleanup(plan: Plan): Promise<void> {
    for (const part of plan.parts) await fsp.rm(part.path, { force: true });
    if (plan.parts.length > 0) await fsyncDirectory(path.dirname(plan.parts[0]!.path));
    crashPoint('after-sources-deleted');
    await ledger.forget(this.o.tableDir, plan.id);
  }
}

/** Reads of a count that comes out low (see Publisher.#count), and the pause before the next. */
const COUNT_READS = 3;
const RECOUNT_DELAY_MS = 100;

/** The row keys of a publication's prepared rows (`_row` 0 where the staged data has none). */
function publicationKeys(prepared: readonly PreparedPart[]): Set<string> {
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

/** Source bytes a publication holds while it is prepared and written: fetched + decoded. */
export function reservationFor(plan: Plan): number {
  return 2 * plan.bytes;
}

async function allMissing(files: readonly string[]): Promise<boolean> {
  for (const f of files) if (await pathExists(f)) return false;
  return true;
}

/** The offsets a plan keeps, per part range clamped to its keep range (not exact: see WritingRecord). */
function spanOf(plan: Plan): OffsetInterval[] {
  const out: OffsetInterval[] = [];
  for (const part of plan.parts) {
    for (const r of part.ranges) {
      const kept = keptBounds(part.keep, r.topic, r.partition, r.firstOffset, r.lastOffset);
      if (kept)
        out.push({
          topic: r.topic,
          partition: r.partition,
          ...kept,
          ...(r.topicId === undefined ? {} : { topicId: r.topicId }),
        });
    }
  }
  return out;
}
