import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { Schema, type RecordBatch } from 'apache-arrow';
import { diskFullError } from '../common/disk-space';
import { injectedDiskFull } from '../faults/disk-full';
import { DiskFullError } from '../common/errors';
import { realDirectorySync, type DirectorySync } from '../common/fs-durable';
import type { RecordOffset } from '../common/offsets';
import { tpKey, type TopicPartitionKey } from '../common/offsets';
import type { FileLock, FileLocks } from './file-locks';
import type { OpenPartLimit } from './open-parts';
import { epochMetadata, type StagingEpoch } from './epoch';
import { END_OF_STREAM, chunksAfter, encodeBatchChunks, encodeSchema } from './ipc-stream';
import { RunningCrc, digestTrailer, partChecksum } from './part-digest';
import { formatPartName, type MinuteKey } from './part-name';
import type { SchemaKey } from './schema-key';
import type { PartOffsetRange, SealedPart } from './sealed-part';
import { TOPIC_ID_COLUMN } from './system-columns';

export type WriterState = 'open' | 'detached' | 'sealed' | 'failed';

/** How a writer reaches the file system: seams for the directory fsync and the open-file bound. */
export interface PartWriterFiles {
  readonly directorySync?: DirectorySync;
  /** Taken before the file is opened, given back once it is closed. */
  readonly openParts?: OpenPartLimit<PartWriter>;
}

/**
 * One open part file: an append-only Arrow IPC stream for one (schema, minute).
 *
 * Invariants:
 * - the file is created with `wx` (never an existing file), its directory is fsynced
 *   before the first sync completes, and it is never truncated or reopened; after
 *   `finish()` it is renamed to `.arrows` and never written again;
 * - it holds a slot of the staging's open-part bound from before the open to after
 *   the close;
 * - batches are appended in memory by `append()` and reach the file only in
 *   `syncPending()` / `finish()`, which run one at a time in call order;
 * - the lock on the open path is held from creation until the part is sealed or
 *   the writer failed, and is released by this writer only;
 * - a full disk (ENOSPC, EDQUOT) fails the operation with DiskFullError but not the
 *   writer: the bytes not yet written are kept and written first by the next
 *   operation, at the same file position (a partial write before ENOSPC is simply
 *   overwritten with the same bytes), so a retry after space returns leaves exactly the
 *   stream an uninterrupted write would have. Nothing is reported durable meanwhile.
 *   An fsync that fails stays fatal: after a failed fsync the page cache may have
 *   dropped the dirty pages, and a second fsync can succeed without them.
 */
export class PartWriter {
  readonly path: string;
  readonly sealedPath: string;
  readonly createdAt: number;
  /** The batches' schema plus the epoch in its metadata: what the part's schema message holds. */
  readonly schema: Schema;
  #state: WriterState = 'open';
  #failure: unknown;
  #handle: fsp.FileHandle | undefined;
  #position = 0;
  #opened = false;
  /** Encoded messages a full disk interrupted: `written` of their `bytes` are in the file. */
  #unwritten: { chunks: readonly Uint8Array[]; bytes: number; written: number } | undefined;
  /** End-of-stream is in the file or in #unwritten: a retried finish() must not write it twice. */
  #ended = false;
  #pending: RecordBatch[] = [];
  #pendingBytes = 0;
  #writeBehindQueued = false;
  #unsynced = false;
  #rows = 0;
  #batches = 0;
  readonly #ranges = new Map<
    TopicPartitionKey,
    { -readonly [K in keyof PartOffsetRange]: PartOffsetRange[K] }
  >();
  /** CRC32C of every byte written so far: the trailer's and the plan's checksum, with no read-back. */
  readonly #crc = new RunningCrc();
  readonly #lock: FileLock;
  readonly #directorySync: DirectorySync;
  readonly #openParts: OpenPartLimit<PartWriter> | undefined;
  #chain: Promise<unknown> = Promise.resolve();

  constructor(
    readonly dir: string,
    batchSchema: Schema,
    readonly schemaKey: SchemaKey,
    readonly minute: MinuteKey,
    readonly epoch: StagingEpoch,
    id: string,
    locks: FileLocks,
    owner: string,
    now: number,
    files: PartWriterFiles = {},
  ) {
    const base = { schemaKey, minute, id };
    this.path = path.join(dir, formatPartName(base, 'open'));
    this.sealedPath = path.join(dir, formatPartName(base, 'sealed'));
    this.createdAt = now;
    this.schema = new Schema(batchSchema.fields, new Map([...batchSchema.metadata, ...epochMetadata(epoch)]));
    this.#lock = locks.lock(this.path, owner);
    this.#directorySync = files.directorySync ?? realDirectorySync;
    this.#openParts = files.openParts;
    // A failure here is kept in #failure and reported by the next sync or finish.
    this.#enqueue(async () => {
      await this.#openParts?.acquire(this);
      await this.#ensureOpen();
    }).catch(() => undefined);
  }

  /** Opens the file once; an open a full disk refused created nothing, so it is simply tried again. */
  async #ensureOpen(): Promise<void> {
    if (this.#opened) return;
    try {
      this.#handle = await fsp.open(this.path, 'wx');
    } catch (error) {
      throw diskFullError('staging', this.path, 'open', error) ?? error;
    }
    this.#opened = true;
    // The new name must be durable before any row in the file is reported durable:
    // an fsynced file whose directory entry is lost after a power cut loses its rows.
    await this.#directorySync.syncDirectory(this.dir);
    await this.#writeChunks([encodeSchema(this.schema)]);
  }

  get state(): WriterState {
    return this.#state;
  }
  /** Bytes in the file plus bytes waiting to be written. */
  get bytes(): number {
    const unwritten = this.#unwritten ? this.#unwritten.bytes - this.#unwritten.written : 0;
    return this.#position + unwritten + this.#pendingBytes;
  }
  get rows(): number {
    return this.#rows;
  }
  /** Bytes appended but not yet written to the file. */
  get pendingBytes(): number {
    return this.#pendingBytes;
  }

  /** Buffers a batch of one partition's rows; they reach the disk at the next sync or finish. */
  append(
    batch: RecordBatch,
    topic: string,
    partition: number,
    first: RecordOffset,
    last: RecordOffset,
  ): void {
    if (this.#state !== 'open' && this.#state !== 'detached') {
      throw new Error(`append to a ${this.#state} part ${this.path}`);
    }
    this.#pending.push(batch);
    this.#pendingBytes += batch.data.byteLength;
    this.#rows += batch.numRows;
    this.#batches += 1;
    const key = tpKey(topic, partition);
    const range = this.#ranges.get(key);
    if (range) {
      range.lastOffset = last;
      range.rows += batch.numRows;
    } else {
      // As the read-back (sealed-part.ts offsetRangesOf) records it: the first row's incarnation.
      const topicId = batch.getChild(TOPIC_ID_COLUMN)?.get(0) as string | null | undefined;
      this.#ranges.set(key, {
        topic,
        partition,
        firstOffset: first,
        lastOffset: last,
        rows: batch.numRows,
        ...(typeof topicId === 'string' ? { topicId } : {}),
      });
    }
  }

  /** Stops accepting appends: a flush took this writer out of the table's map. */
  detach(): void {
    if (this.#state === 'open') this.#state = 'detached';
  }

  /**
   * Writes the buffered batches to the file without fsync, to bound memory between
   * durability ticks. Durability still comes only from syncPending() or finish(); a
   * failure here is reported by them.
   */
  writeBehind(): void {
    if (this.#writeBehindQueued || this.#pending.length === 0) return;
    this.#writeBehindQueued = true;
    this.#enqueue(async () => {
      this.#writeBehindQueued = false;
      await this.#ensureOpen();
      await this.#writePending();
    }).catch(() => undefined);
  }

  /** Writes buffered batches as whole messages and fsyncs; one fsync per call, none when nothing changed. */
  syncPending(): Promise<void> {
    return this.#enqueue(async () => {
      if (this.#state === 'sealed') return;
      await this.#ensureOpen();
      await this.#writePending();
      if (this.#unsynced) {
        await this.#handle!.sync();
        this.#unsynced = false;
      }
    });
  }

  /** Ends the stream, fsyncs, renames `.part` → `.arrows` and fsyncs the directory. */
  finish(): Promise<SealedPart> {
    this.detach();
    return this.#enqueue(async () => {
      await this.#ensureOpen();
      await this.#writePending();
      if (!this.#ended) {
        this.#ended = true;
        // End-of-stream and the checksum trailer as one message: a retry never writes either twice.
        const trailer = digestTrailer(this.#crc.with(END_OF_STREAM));
        await this.#writeChunks([END_OF_STREAM, trailer]);
      } else {
        await this.#drainUnwritten();
      }
      await this.#handle!.sync();
      await this.#handle!.close();
      this.#handle = undefined;
      this.#openParts?.release(this);
      await fsp.rename(this.path, this.sealedPath);
      await this.#directorySync.syncDirectory(this.dir);
      this.#state = 'sealed';
      this.#lock.release();
      return {
        path: this.sealedPath,
        schemaKey: this.schemaKey,
        minute: this.minute,
        // As the part's metadata records it (epochFromMetadata): the epoch's topic ids are on the rows.
        epoch: { owner: this.epoch.owner, epoch: this.epoch.epoch },
        bytes: this.#position,
        rows: this.#rows,
        batches: this.#batches,
        checksum: partChecksum(this.#crc.value),
        ranges: [...this.#ranges.values()].map((r) => ({ ...r })),
      };
    });
  }

  /** Closes the file after a failure; the part stays on disk for recovery. */
  async abandon(): Promise<void> {
    this.#state = 'failed';
    const handle = this.#handle;
    this.#handle = undefined;
    this.#lock.release();
    await handle?.close().catch(() => undefined);
    this.#openParts?.release(this);
  }

  #enqueue<T>(op: () => Promise<T>): Promise<T> {
    const run = this.#chain.then(async () => {
      if (this.#state === 'failed') throw this.#failure;
      try {
        return await op();
      } catch (error) {
        // A full disk is waited out: the writer keeps its file, its lock and its bytes.
        if (error instanceof DiskFullError) throw error;
        this.#failure = error;
        await this.abandon();
        throw error;
      }
    });
    // Later operations must still run (and see 'failed') after a rejection.
    this.#chain = run.catch(() => undefined);
    return run;
  }

  async #writePending(): Promise<void> {
    await this.#drainUnwritten();
    if (this.#pending.length === 0) return;
    const batches = this.#pending;
    this.#pending = [];
    this.#pendingBytes = 0;
    await this.#writeChunks(encodeBatchChunks(this.schema, batches));
  }

  async #writeChunks(chunks: readonly Uint8Array[]): Promise<void> {
    this.#unwritten = { chunks, bytes: chunks.reduce((n, c) => n + c.byteLength, 0), written: 0 };
    await this.#drainUnwritten();
  }

  /** Writes what is left of the current messages at the file's end; kept for a retry if the disk is full. */
  async #drainUnwritten(): Promise<void> {
    const unwritten = this.#unwritten;
    if (!unwritten) return;
    while (unwritten.written < unwritten.bytes) {
      let bytesWritten: number;
      try {
        const injected = injectedDiskFull('staging', this.path);
        if (injected) throw injected;
        // One vectored write (libuv loops over IOV_MAX and partial writes; a short count
        // means it stopped at an error, which the next round meets).
        ({ bytesWritten } = await this.#handle!.writev(
          chunksAfter(unwritten.chunks, unwritten.written),
          this.#position,
        ));
      } catch (error) {
        // Bytes past #position may be in the file (a torn tail): the retry overwrites them.
        throw diskFullError('staging', this.path, 'write', error) ?? error;
      }
      unwritten.written += bytesWritten;
      this.#position += bytesWritten;
    }
    this.#unwritten = undefined;
    for (const chunk of unwritten.chunks) this.#crc.update(chunk);
    this.#unsynced = true;
  }
}
