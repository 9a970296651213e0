import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { type RecordBatch } from 'apache-arrow';
import { compareSchemas } from 'apache-arrow/visitor/typecomparator';
import type { BoundedBudget } from '../common/bounded-budget';
import { asError, errorMessage } from '../common/errors';
import { fsyncDirectory, pathExists } from '../common/fs-durable';
import type { Logger } from '../common/logger';
import { countedOutcome, resolvedByReplay } from '../lance/commit-rule';
import type { LanceTable, WriteMode, Written } from '../lance/lance-table';
import { crashPoint } from '../faults/crash-points';
import { keptBounds } from './keep-range';
import { ledger, type LedgerEntry, type OffsetInterval, type Plan, type WritingRecord } from './ledger';
import { preparePart, type PreparationContext, type PreparedPart } from './preparation';
import { publicationLayout, sealPublicationFile, type PublicationLayout } from './publication-file';
import { PublicationCheck, publicationKeys } from './publication-check';
import { PartialPublicationError, PublicationMismatchError } from './publication-errors';
import type { SourceBuffers } from './source-buffers';

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
  /** An upsert publication's merge (upsert-merge.ts): keys upserted and deleted, rows changed, seconds. */
  readonly merge?: Written['merge'];
}

export interface PublisherOptions {
  readonly tableDir: string;
  readonly lance: LanceTable;
  readonly preparation: PreparationContext;
  readonly reservation: BoundedBudget;
  readonly logger: Logger;
  /**
   * 'insert-if-absent' in 'published' commit mode (another owner may hold some of the
   * rows); 'upsert' for an upsert table, whatever the commit mode; default 'append'.
   */
  readonly write?: WriteMode;
  /** The buffers publications read their parts into: the worker's, shared by its tables (SharedBudgets). */
  readonly buffers: SourceBuffers;
}

/**
 * Runs one plan to its single Lance commit: prepare every part (permits and source
 * reservation), check the descriptors against the plan, mark `writing` (with the
 * exact offset intervals), one `add`, mark `published`, then delete the sources.
 * Buffered and streamed preparation share all of it but the hand-over of batches.
 */
export class Publisher {
  readonly #check: PublicationCheck;
  readonly #buffers: SourceBuffers;

  constructor(private readonly o: PublisherOptions) {
    this.#check = new PublicationCheck(o.lance, o.logger);
    this.#buffers = o.buffers;
  }

  async publish(plan: Plan, mode: PreparationMode): Promise<PublicationResult> {
    const started = performance.now();
    // The whole publication's source bytes (fetched + decoded, ~2× the parts) in one
    // request, held until the add ends: Lance takes the publication as one table, so
    // every part stays in memory until then. Per-part requests waited on each other
    // when the publication did not fit (a deadlock); one request larger than the whole
    // budget is admitted once nothing else holds any, so it runs alone instead.
    const reserved = reservationFor(plan);
    await this.o.reservation.acquire(0, reserved);
    // The parts are read into one buffer laid out as the publication's IPC file
    // (publication-file.ts), which LanceDB's add can take as it is.
    const layout = publicationLayout(plan.parts.map((p) => p.bytes));
    let buffer: Buffer;
    try {
      buffer = this.#buffers.lease(layout.capacity);
    } catch (error) {
      this.o.reservation.release(0, reserved);
      throw error;
    }
    const tasks = plan.parts.map((part, i) => {
      const slot = layout.slots[i]!;
      return preparePart(part, this.o.preparation, buffer.subarray(slot.offset, slot.offset + slot.length));
    });
    const ipcFile = () => this.#publicationFile(plan, prepared, buffer, layout);
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
    let written: Written;
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
      written = await this.o.lance.append({
        batches: source,
        beforeAdd: async (versionBefore) => {
          await settle();
          if (firstError !== undefined) throw asError(firstError);
          preparedAt = performance.now();
          record = { ...this.#verify(plan, prepared), fromVersion: versionBefore };
          await ledger.markWriting(this.o.tableDir, record);
          crashPoint('before-add');
        },
        afterAdd: async (addError) => {
          const t0 = performance.now();
          try {
            await this.#check.afterAdd(plan, this.#writeOf(plan), record!, addError, () =>
              publicationKeys(prepared),
            );
          } finally {
            checkSeconds += (performance.now() - t0) / 1000;
          }
        },
        mode: this.#writeOf(plan),
        ipcFile,
      });
      crashPoint('after-add');
    } finally {
      // The batches are in Lance (or the publication failed): the buffer they were read
      // into and the source reservation go back. Nothing holds the batches after this.
      await settle();
      prepared.length = 0;
      this.#buffers.release(buffer);
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
      ...(written.merge ? { merge: written.merge } : {}),
    };
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
    const write = this.#writeOf(plan);
    // An upsert is settled by writing it again, never by a count (commit-rule.ts).
    if (!done && writing && !resolvedByReplay(write)) {
      // The same rule as after a rejected add: one count, final.
      const t0 = performance.now();
      const found = await this.#check.count(writing);
      const outcome = countedOutcome(write, found, writing.rows, undefined);
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
      // (An upsert's rows may have been replaced since: its span tells nothing; warned.)
      const found = resolvedByReplay(write) ? plan.rows : await this.o.lance.countRows(spanOf(plan));
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
   * A plan of an epoch the chain dropped is insert-if-absent whatever the replica's mode,
   * but in an upsert table, whose merge already leaves what another owner wrote alone.
   */
  #writeOf(plan: Plan): WriteMode {
    if (this.o.write === 'upsert') return 'upsert';
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

  /**
   * The publication's IPC file over its parts' bytes, when it holds exactly the rows the
   * decoded batches hold: every part whole (no cut), read into its slot, of one schema,
   * with as many record batches and rows in its blocks as were decoded. Otherwise, or if
   * it cannot be made, undefined: LanceDB then takes the decoded rows.
   */
  #publicationFile(
    plan: Plan,
    prepared: readonly PreparedPart[],
    buffer: Buffer,
    layout: PublicationLayout,
  ): Uint8Array | undefined {
    const first = prepared[0];
    const whole =
      first !== undefined &&
      prepared.length === plan.parts.length &&
      plan.parts.every((p) => p.keptRows === p.rows) &&
      prepared.every((p) => p.inSlot && compareSchemas(p.schema, first.schema));
    if (!whole) return undefined;
    try {
      return sealPublicationFile(
        buffer,
        layout,
        first.schema,
        prepared.map((p) => ({ batches: p.batches.length, rows: p.descriptor.rows })),
      );
    } catch (error) {
      this.o.logger.warn(
        { event: 'publication.file.failed', id: plan.id, err: errorMessage(error) },
        'the publication’s parts did not make an IPC file; LanceDB takes the decoded rows',
      );
      return undefined;
    }
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
