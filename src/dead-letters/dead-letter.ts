import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import type { IHeaders } from 'kafkajs';
import { DeadLetterWriteError, errorMessage } from '../common/errors';
import { mkdirDurably, realDirectorySync, type DirectorySync } from '../common/fs-durable';
import type { DeadLetterReason } from './dead-letter-reason';
import { scrubSecrets } from '../common/redaction';

/** A record that could not be staged, with everything needed to replay it. */
export interface DeadLetter {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly timestamp: string;
  readonly reason: DeadLetterReason;
  readonly detail: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers: IHeaders | undefined;
}

/**
 * Where dead letters go. `write` resolves only once they are durable (an acked
 * produce with acks=-1, or an fsynced file): only then do their offsets count as
 * handled and may be committed. It rejects with a DeadLetterWriteError whose
 * `retriable` says whether trying again can help.
 */
export interface DeadLetterSink {
  readonly description: string;
  write(letters: readonly DeadLetter[]): Promise<void>;
  close(): Promise<void>;
}

/** File errors that stay whatever we wait for (permissions; a file where a directory must be: EEXIST, ENOTDIR). */
const PERMANENT_FILE_ERRORS = new Set([
  'EEXIST',
  'EACCES',
  'EPERM',
  'EROFS',
  'EISDIR',
  'ENOTDIR',
  'ENAMETOOLONG',
  'EFBIG',
]);

function errnoCode(error: unknown): string | undefined {
  // Not `instanceof Error`: errors from another realm (a vm context, jest) fail it.
  if (typeof error !== 'object' || error === null || !('code' in error)) return undefined;
  return typeof error.code === 'string' ? error.code : undefined;
}

/**
 * Dead letters as JSON lines (bytes in base64), appended and fsynced per write. Writes go one
 * after another, each as one `write` on the O_APPEND handle: Node's appendFile writes in 512 KiB
 * chunks, and two appends under way at once (two partitions' letters) interleaved their chunks,
 * breaking a large letter's line in two.
 */
export class FileDeadLetterSink implements DeadLetterSink {
  readonly description: string;
  #handle: fsp.FileHandle | undefined;
  /** The write under way (settled either way), which the next one waits for. */
  #tail: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly file: string,
    private readonly directorySync: DirectorySync = realDirectorySync,
  ) {
    this.description = `file ${file}`;
  }

  write(letters: readonly DeadLetter[]): Promise<void> {
    if (letters.length === 0) return Promise.resolve();
    const turn = this.#tail.then(() => this.#write(letters));
    this.#tail = turn.catch(() => undefined);
    return turn;
  }

  async #write(letters: readonly DeadLetter[]): Promise<void> {
    try {
      await this.#append(letters);
    } catch (error) {
      // Reopen on the next write: the handle may be what failed.
      const handle = this.#handle;
      this.#handle = undefined;
      await handle?.close().catch(() => undefined);
      const code = errnoCode(error);
      throw new DeadLetterWriteError(this.description, errorMessage(error), {
        retriable: code === undefined || !PERMANENT_FILE_ERRORS.has(code),
        cause: error,
      });
    }
  }

  async #append(letters: readonly DeadLetter[]): Promise<void> {
    let torn = false;
    if (!this.#handle) {
      const dir = path.dirname(this.file);
      await mkdirDurably(dir, this.directorySync);
      const handle = await fsp.open(this.file, 'a+');
      // The file may be new: its name must be durable before the letters in it count
      // as handled (their offsets get committed). Once per open, whether new or not.
      try {
        await this.directorySync.syncDirectory(dir);
        torn = await endsTorn(handle);
      } catch (error) {
        await handle.close();
        throw error;
      }
      this.#handle = handle;
    }
    const lines = letters.map((l) =>
      JSON.stringify({
        topic: l.topic,
        partition: l.partition,
        offset: l.offset,
        timestamp: l.timestamp,
        reason: l.reason,
        // A reason's text may quote an error that echoed an option: scrubbed like a log line.
        detail: scrubSecrets(l.detail),
        key: l.key?.toString('base64') ?? null,
        value: l.value?.toString('base64') ?? null,
        headers: Object.fromEntries(
          Object.entries(l.headers ?? {}).map(([k, v]) => [k, Buffer.isBuffer(v) ? v.toString('base64') : v]),
        ),
      }),
    );
    // A failed or crashed append can leave a partial line: end it, so that the letters
    // written now (a retry of the same ones, often) each stay one readable line.
    const data = Buffer.from(`${torn ? '\n' : ''}${lines.join('\n')}\n`);
    for (let at = 0; at < data.length;) {
      const { bytesWritten } = await this.#handle.write(data, at, data.length - at);
      at += bytesWritten;
    }
    await this.#handle.sync();
  }

  async close(): Promise<void> {
    await this.#tail;
    await this.#handle?.close();
    this.#handle = undefined;
  }
}

async function endsTorn(handle: fsp.FileHandle): Promise<boolean> {
  const { size } = await handle.stat();
  if (size === 0) return false;
  const last = Buffer.alloc(1);
  await handle.read(last, 0, 1, size - 1);
  return last[0] !== 0x0a;
}
