import * as path from 'node:path';
import type { RecordBatch } from 'apache-arrow';
import { ulid } from 'ulid';
import { DiskFullError, KafkaLanceError, StagingClosedError } from '../common/errors';
import { mkdirDurably, realDirectorySync, type DirectorySync } from '../common/fs-durable';
import { diskFullError } from '../common/disk-space';
import type { Logger } from '../common/logger';
import {
  recordOffset,
  type DurableOffset,
  type RecordOffset,
  type TopicPartitionKey,
} from '../common/offsets';
import type { FileLocks } from './file-locks';
import type { StagingEpoch } from './epoch';
import { minuteKeyOf, parsePartName, type MinuteKey } from './part-name';
import { HighWaters } from './high-waters';
import { OpenPartLimit } from './open-parts';
import { PartWriter } from './part-writer';
import { schemaKeyOf } from './schema-key';
import type { SealedPart } from './sealed-part';
import { checkNonDecreasing, minuteRuns, offsetsOf } from './push-runs';

export interface TableStagingOptions {
  /** `<dataDir>/staging/<table>`; created when missing. */
  readonly tableDir: string;
  readonly table: string;
  readonly locks: FileLocks;
  /** Names this instance in file locks and logs (for example `staging-worker-2`). */
  readonly owner: string;
  readonly logger: Logger;
  /** Seal a part once it holds this many bytes. */
  readonly maxPartBytes: number;
  /** Seal a part this long after it was opened, so freshness in Lance is bounded (Connect's rotate.schedule.interval.ms). */
  readonly maxPartAgeMs: number;
  /** A part writes its buffered rows (without fsync) once this many bytes wait, so memory stays bounded between ticks. */
  readonly writeBehindBytes?: number;
  /** The epoch recorded in the parts opened until the next beginEpoch(). */
  readonly epoch: StagingEpoch;
  readonly clock?: () => number;
  /**
   * Part files open at once (default 64): event time opens one part per minute, and a
   * backfill over many minutes must not run out of file descriptors. The oldest open
   * part is sealed to make room.
   */
  readonly maxOpenParts?: number;
  /**
   * A bound shared with the other tables of the same lane (in place of `maxOpenParts`):
   * its owner relieves pressure across the lane (`sealOldestOpenPart`), and
   * `makeRoom` runs before this table opens a new part (the lane seals its oldest open
   * part when the lane is at the bound).
   */
  readonly sharedOpenParts?: OpenPartLimit<PartWriter>;
  readonly makeRoom?: () => void;
  /** Directory fsyncs (a seam for tests); the real fsync by default. */
  readonly directorySync?: DirectorySync;
}

/** One partition's rows for staging. */
export interface StagingPush {
  readonly topic: string;
  readonly partition: number;
  /** Rows with the system columns, in non-decreasing `_offset` order; absent when no record produced a row. */
  readonly batch?: RecordBatch;
  /** The minute of every row, or one minute per row (event time); rows of one minute go to one part. */
  readonly minute: MinuteKey | readonly MinuteKey[];
  /**
   * The highest offset this push accounts for: its last row, or a later record that
   * produced no row (filtered out, or dead-lettered durably). It becomes durable with the rows.
   */
  readonly handledThrough: RecordOffset;
}

export interface PushResult {
  readonly staged: number;
  /** Rows at or below the partition's high-water: redeliveries, dropped on purpose. */
  readonly skipped: number;
}

export interface FlushResult {
  readonly sealed: readonly SealedPart[];
}

export interface StagingStats {
  readonly openParts: number;
  readonly sealingParts: number;
  readonly stagedRows: number;
  readonly skippedRows: number;
  readonly sealedParts: number;
  /** Rows appended but not yet written to their part files. */
  readonly bufferedBytes: number;
}

const DEFAULT_WRITE_BEHIND_BYTES = 8 * 1024 * 1024;
export const DEFAULT_MAX_OPEN_PARTS = 64;

/** Staging failed on disk: nothing more becomes durable in this process; restart and let recovery run. */
export class StagingFailedError extends KafkaLanceError {
  constructor(table: string, cause: unknown) {
    super('STAGING_FAILED', `staging for table ${table} failed on disk; restart to recover`, {
      cause,
      context: { table },
    });
  }
}

/**
 * The staging of one table: routes pushed rows to part writers keyed by
 * (schemaKey, minute), makes them durable in group-commit ticks (`sync`), and
 * seals parts (`flush`). Durable offsets flow back to the caller as data; only the
 * offset tracker commits them.
 *
 * Pushes are synchronous and never wait for a seal: a flush detaches writers in one
 * synchronous section (the lifecycle lock) and finishes them outside it, and a push
 * for a detached writer's schema/minute opens a new part.
 */
export class TableStaging {
  readonly #options: TableStagingOptions;
  readonly #clock: () => number;
  /** Writers accepting rows, by `${schemaKey}.${minute}`. */
  readonly #open = new Map<string, PartWriter>();
  /** Every writer not yet sealed (open or detached), with its seal in progress when there is one. */
  readonly #unsealed = new Map<PartWriter, Promise<SealedPart> | undefined>();
  /** Seals started outside a flush (to make room for a new part); the next flush reports them. */
  #sealedEarly: Array<Promise<SealedPart>> = [];
  readonly #openParts: OpenPartLimit<PartWriter>;
  readonly #highWaters: HighWaters;
  #epoch: StagingEpoch;
  #failure: unknown;
  #closed = false;
  #stagedRows = 0;
  #skippedRows = 0;
  #sealedParts = 0;

  private constructor(options: TableStagingOptions) {
    this.#options = options;
    this.#clock = options.clock ?? Date.now;
    this.#epoch = options.epoch;
    this.#openParts =
      options.sharedOpenParts ??
      new OpenPartLimit(options.maxOpenParts ?? DEFAULT_MAX_OPEN_PARTS, () => {
        this.#relievePressure();
      });
    this.#highWaters = new HighWaters();
  }

  static async open(options: TableStagingOptions): Promise<TableStaging> {
    try {
      await mkdirDurably(options.tableDir, options.directorySync);
    } catch (error) {
      // A routing lane makes a table's directory when a record first names it: a full disk
      // then is waited out like any other staging write, not a crash.
      throw diskFullError('staging', options.tableDir, 'mkdir', error) ?? error;
    }
    return new TableStaging(options);
  }

  get table(): string {
    return this.#options.table;
  }

  push(input: StagingPush): PushResult {
    this.#assertUsable();
    const highWater = this.#highWaters.pushedThrough(input.topic, input.partition);
    let staged = 0;
    let skipped = 0;
    if (input.batch && input.batch.numRows > 0) {
      const batch = input.batch;
      const offsets = offsetsOf(batch);
      let start = 0;
      while (start < offsets.length && offsets[start]! <= highWater) start++;
      checkNonDecreasing(input.topic, input.partition, offsets, start);
      skipped = start;
      staged = batch.numRows - start;
      for (const run of minuteRuns(input.minute, offsets, start, batch.numRows)) {
        const slice = run.from === 0 && run.to === batch.numRows ? batch : batch.slice(run.from, run.to);
        const writer = this.#writerFor(batch, run.minute);
        writer.append(
          slice,
          input.topic,
          input.partition,
          recordOffset(offsets[run.from]!),
          recordOffset(offsets[run.to - 1]!),
        );
        // Sealed now rather than at the next flush: a detached part must already be on its
        // way to closing its file, or #relievePressure would count on a slot that never frees.
        if (writer.bytes >= this.#options.maxPartBytes) this.#sealEarly(writer);
        else if (writer.pendingBytes >= (this.#options.writeBehindBytes ?? DEFAULT_WRITE_BEHIND_BYTES)) {
          writer.writeBehind();
        }
      }
    }
    if (input.handledThrough > highWater)
      this.#highWaters.pushed(input.topic, input.partition, input.handledThrough as number as DurableOffset);
    this.#stagedRows += staged;
    this.#skippedRows += skipped;
    return { staged, skipped };
  }

  /**
   * The durability tick: writes every buffered batch, fsyncs each part that changed
   * (one fsync per part), and returns per partition the highest offset `o` such that
   * every record `<= o` handed to staging is durable.
   */
  async sync(): Promise<ReadonlyMap<TopicPartitionKey, DurableOffset>> {
    this.#assertUsable();
    // Everything pushed before this line is in some writer's buffer; the snapshot
    // becomes durable once those writers have written and fsynced.
    const snapshot = this.#highWaters.pushedSnapshot();
    const writers = [...this.#unsealed.keys()];
    const results = await Promise.allSettled(writers.map((w) => w.syncPending()));
    const failed = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
    if (failed.length > 0) {
      // A full disk pauses durability (nothing new is reported, the writers keep their
      // bytes for the next tick); any other failure ends this staging.
      const other = failed.find((e) => !(e instanceof DiskFullError));
      if (other === undefined && failed[0] instanceof DiskFullError) throw failed[0];
      throw this.#fail(other);
    }
    this.#highWaters.durable(snapshot);
    return this.durableOffsets();
  }

  /**
   * Seals the parts that are due (their minute has passed, or they reached the age
   * or size limit), or all of them when `force` is set. Returns the parts sealed by
   * this call. Sealing also makes the rows durable.
   */
  async flush(options: { force?: boolean } = {}): Promise<FlushResult> {
    this.#assertUsable();
    // The table's lifecycle lock: this section has no await, so JavaScript runs it to
    // completion and no push can interleave with a detach. Finishing happens after it.
    const started: Array<Promise<SealedPart>> = [];
    const now = this.#clock();
    for (const writer of [...this.#open.values()]) {
      if (options.force || this.#isDue(writer, now)) this.#detach(writer);
    }
    for (const [writer, sealing] of this.#unsealed) {
      if (sealing === undefined && writer.state === 'detached') started.push(this.#startSeal(writer));
    }
    started.push(...this.#sealedEarly.splice(0));
    const results = await Promise.allSettled(started);
    const sealed: SealedPart[] = [];
    let firstError: unknown;
    for (const r of results) {
      if (r.status === 'fulfilled') {
        sealed.push(r.value);
        this.#sealedParts += 1;
        this.#options.logger.debug({
          event: 'staging.sealed',
          table: this.table,
          part: r.value.path,
          rows: r.value.rows,
        });
      } else {
        firstError ??= r.reason;
      }
    }
    for (const [writer] of this.#unsealed) if (writer.state === 'sealed') this.#unsealed.delete(writer);
    if (firstError !== undefined) {
      const diskFull = results.every((r) => r.status === 'fulfilled' || r.reason instanceof DiskFullError);
      // A seal a full disk interrupted is started again by the next flush (see #startSeal).
      if (diskFull && firstError instanceof DiskFullError) throw firstError;
      throw this.#fail(firstError);
    }
    return { sealed };
  }

  get epoch(): StagingEpoch {
    return this.#epoch;
  }

  /**
   * Starts a new epoch (the assignment changed). Every open part is detached at
   * once, before any await, so no part ever holds rows of two epochs; the detached
   * parts are sealed before this resolves.
   */
  async beginEpoch(epoch: StagingEpoch): Promise<FlushResult> {
    this.#assertUsable();
    // The same epoch again: a retry after a full disk failed the seal (the parts are detached).
    if (epoch.owner === this.#epoch.owner && epoch.epoch === this.#epoch.epoch) return this.flush();
    if (epoch.owner === this.#epoch.owner && epoch.epoch < this.#epoch.epoch) {
      throw new RangeError(`epoch ${epoch.epoch} does not follow ${this.#epoch.epoch}`);
    }
    this.#epoch = epoch;
    for (const writer of [...this.#open.values()]) this.#detach(writer);
    return this.flush();
  }

  /**
   * The partition was lost: rows above `ceiling` belong to the next owner. Lowers the
   * redelivery threshold so that, if the partition comes back, records from the
   * broker's committed offset are staged again (the planner cuts the old copies).
   */
  lowerHighWater(topic: string, partition: number, ceiling: DurableOffset): void {
    this.#highWaters.lower(topic, partition, ceiling);
  }

  /** Raises the redelivery threshold (for example to the broker's committed offset at assignment). */
  raiseHighWater(topic: string, partition: number, offset: DurableOffset): void {
    this.#highWaters.raise(topic, partition, offset);
  }

  /**
   * Ids of every part not yet sealed (open or detached, its rename to `.arrows` not
   * known done). A part leaves this set only after its rename, so a directory listing
   * taken after this call sees every part of the set that has left it (commit after
   * published, src/ownership/publication-gate.ts).
   */
  unsealedPartIds(): string[] {
    const ids: string[] = [];
    for (const writer of this.#unsealed.keys()) {
      const name = parsePartName(path.basename(writer.path));
      if (name) ids.push(name.id);
    }
    return ids;
  }

  durableOffsets(): ReadonlyMap<TopicPartitionKey, DurableOffset> {
    return this.#highWaters.durableOffsets();
  }

  /** Parts open for appends (not yet detached). */
  get openPartCount(): number {
    return this.#open.size;
  }

  stats(): StagingStats {
    let bufferedBytes = 0;
    let sealingParts = 0;
    for (const [writer, sealing] of this.#unsealed) {
      bufferedBytes += writer.pendingBytes;
      if (sealing) sealingParts += 1;
    }
    return {
      openParts: this.#open.size,
      sealingParts,
      stagedRows: this.#stagedRows,
      skippedRows: this.#skippedRows,
      sealedParts: this.#sealedParts,
      bufferedBytes,
    };
  }

  /** Seals everything and stops accepting pushes. */
  async close(): Promise<FlushResult> {
    const result = await this.flush({ force: true });
    this.#closed = true;
    return result;
  }

  #writerFor(batch: RecordBatch, minute: MinuteKey): PartWriter {
    const schemaKey = schemaKeyOf(batch.schema);
    const key = `${schemaKey}.${minute}`;
    let writer = this.#open.get(key);
    if (!writer) {
      // Make room first: the oldest open part (Map order is creation order) is sealed;
      // under a lane's shared bound, the lane's oldest.
      if (this.#options.makeRoom) this.#options.makeRoom();
      else if (this.#open.size >= this.#openParts.max) this.#sealEarly(this.#open.values().next().value!);
      writer = new PartWriter(
        this.#options.tableDir,
        batch.schema,
        schemaKey,
        minute,
        this.#epoch,
        ulid(),
        this.#options.locks,
        this.#options.owner,
        this.#clock(),
        { directorySync: this.#options.directorySync ?? realDirectorySync, openParts: this.#openParts },
      );
      this.#open.set(key, writer);
      this.#unsealed.set(writer, undefined);
    }
    return writer;
  }

  #detach(writer: PartWriter): void {
    const key = `${writer.schemaKey}.${writer.minute}`;
    if (this.#open.get(key) === writer) this.#open.delete(key);
    writer.detach();
  }

  /**
   * Detaches a writer and starts its seal now, without waiting for it (pushes never
   * wait): its file is closed soon and its slot goes to the next part. A failure is
   * reported by the next sync (the writer fails its later operations) and flush.
   */
  #sealEarly(writer: PartWriter): void {
    this.#detach(writer);
    if (this.#unsealed.get(writer) !== undefined) return;
    const promise = this.#startSeal(writer);
    promise.catch(() => undefined); // observed by the next flush; never an unhandled rejection
    this.#sealedEarly.push(promise);
  }

  /**
   * Starts a writer's seal and records it. A seal a full disk interrupted is forgotten
   * (the writer is still detached, its bytes kept), so the next flush starts it again.
   */
  #startSeal(writer: PartWriter): Promise<SealedPart> {
    const promise = writer.finish();
    this.#unsealed.set(writer, promise);
    promise.catch((error: unknown) => {
      if (error instanceof DiskFullError && this.#unsealed.get(writer) === promise)
        this.#unsealed.set(writer, undefined);
    });
    return promise;
  }

  /**
   * A part waits for a file slot. Slots held by parts already being sealed come back
   * by themselves; only when those are too few are open parts sealed, or a waiting
   * part could wait on open parts that seal only at a flush the waiting part holds up.
   */
  #relievePressure(): void {
    let releasing = 0;
    for (const writer of this.#openParts.holders()) if (writer.state !== 'open') releasing += 1;
    while (releasing < this.#openParts.waiting && this.sealOldestOpenPart(true)) releasing += 1;
  }

  /**
   * When this table's oldest open part was opened (only parts holding a file slot when
   * `holdingSlot`): a shared bound seals the lane's oldest first.
   */
  oldestOpenPartSince(holdingSlot: boolean): number | undefined {
    for (const writer of this.#open.values())
      if (!holdingSlot || this.#openParts.holds(writer)) return writer.createdAt;
    return undefined;
  }

  /** Seals this table's oldest open part (holding a file slot when `holdingSlot`); false when it has none. */
  sealOldestOpenPart(holdingSlot: boolean): boolean {
    for (const writer of this.#open.values()) {
      if (!holdingSlot || this.#openParts.holds(writer)) {
        this.#sealEarly(writer);
        return true;
      }
    }
    return false;
  }

  #isDue(writer: PartWriter, now: number): boolean {
    return (
      writer.minute < minuteKeyOf(now) ||
      now - writer.createdAt >= this.#options.maxPartAgeMs ||
      writer.bytes >= this.#options.maxPartBytes
    );
  }

  #fail(error: unknown): StagingFailedError {
    this.#failure ??= error;
    this.#options.logger.error(
      { event: 'staging.failed', table: this.table, err: error },
      'staging failed on disk; durable offsets stop here',
    );
    return new StagingFailedError(this.table, error);
  }

  #assertUsable(): void {
    if (this.#failure !== undefined) throw new StagingFailedError(this.table, this.#failure);
    if (this.#closed) throw new StagingClosedError(this.table);
  }
}

export const tableStagingDir = (dataDir: string, table: string): string =>
  path.join(dataDir, 'staging', table);
