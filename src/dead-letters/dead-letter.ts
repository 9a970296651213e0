import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import {
  KafkaJSError,
  KafkaJSNumberOfRetriesExceeded,
  KafkaJSProtocolError,
  type IHeaders,
  type Producer,
} from 'kafkajs';
import { DeadLetterWriteError, errorMessage } from '../common/errors';
import { mkdirDurably, realDirectorySync, type DirectorySync } from '../common/fs-durable';
import type { DeadLetterReason } from './dead-letter-reason';

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

/** Dead letters to a Kafka topic, with Kafka Connect's `__connect.errors.*` headers. */
export class KafkaDeadLetterSink implements DeadLetterSink {
  readonly description: string;

  constructor(
    private readonly producer: Producer,
    private readonly topic: string,
    private readonly connectorName: string,
    private readonly contextHeaders: boolean,
  ) {
    this.description = `topic ${topic}`;
  }

  async write(letters: readonly DeadLetter[]): Promise<void> {
    for (const chunk of chunksOf(letters, MAX_SEND_BYTES)) await this.#send(chunk);
  }

  /**
   * The broker checks max.message.bytes against a whole record batch, and all the
   * letters of one send to one partition are one batch: letters that each fit can be
   * refused together. Halve until each letter goes alone; only a letter too large by
   * itself is a failure (a half already sent may go again on a retry: at-least-once).
   */
  async #send(letters: readonly DeadLetter[]): Promise<void> {
    try {
      await this.producer.send({
        topic: this.topic,
        acks: -1,
        messages: letters.map((l) => ({
          key: l.key,
          value: l.value,
          timestamp: l.timestamp,
          headers: this.contextHeaders
            ? { ...l.headers, ...connectHeaders(l, this.connectorName) }
            : l.headers,
        })),
      });
    } catch (error) {
      const type = protocolErrorIn(error)?.type;
      if (letters.length > 1 && (type === 'MESSAGE_TOO_LARGE' || type === 'RECORD_LIST_TOO_LARGE')) {
        const half = Math.ceil(letters.length / 2);
        await this.#send(letters.slice(0, half));
        await this.#send(letters.slice(half));
        return;
      }
      throw classifyProduceError(this.description, this.topic, error);
    }
  }

  async close(): Promise<void> {
    await this.producer.disconnect();
  }
}

export function connectHeaders(l: DeadLetter, connectorName: string): Record<string, string> {
  return {
    '__connect.errors.topic': l.topic,
    '__connect.errors.partition': String(l.partition),
    '__connect.errors.offset': String(l.offset),
    '__connect.errors.connector.name': connectorName,
    '__connect.errors.stage': l.reason === 'transform-failed' ? 'TRANSFORMATION' : 'VALUE_CONVERTER',
    '__connect.errors.exception.class.name': `kafka-lance.${l.reason}`,
    '__connect.errors.exception.message': l.detail,
  };
}

/** Letters per produce request, by size: under the broker's default max.message.bytes (1 MiB). */
const MAX_SEND_BYTES = 512 * 1024;

function letterBytes(l: DeadLetter): number {
  let bytes = (l.key?.byteLength ?? 0) + (l.value?.byteLength ?? 0) + l.detail.length + 256;
  for (const [name, v] of Object.entries(l.headers ?? {})) {
    for (const one of Array.isArray(v) ? v : [v]) bytes += name.length + (one?.length ?? 0);
  }
  return bytes;
}

function* chunksOf(letters: readonly DeadLetter[], maxBytes: number): Generator<readonly DeadLetter[]> {
  let start = 0;
  let bytes = 0;
  for (let i = 0; i < letters.length; i++) {
    const size = letterBytes(letters[i]!);
    if (i > start && bytes + size > maxBytes) {
      yield letters.slice(start, i);
      start = i;
      bytes = 0;
    }
    bytes += size;
  }
  if (start < letters.length) yield letters.slice(start);
}

/**
 * Broker answers that no retry can change for these letters. UNKNOWN_TOPIC_OR_PARTITION
 * is retriable in Kafka's table (a topic being created), but kafkajs has already
 * retried it when it reaches us, and the producer never auto-creates the topic.
 */
const PERMANENT_PRODUCE_ERRORS = new Set([
  'MESSAGE_TOO_LARGE',
  'RECORD_LIST_TOO_LARGE',
  'INVALID_RECORD',
  'UNKNOWN_TOPIC_OR_PARTITION',
  'INVALID_TOPIC_EXCEPTION',
  'TOPIC_AUTHORIZATION_FAILED',
  'CLUSTER_AUTHORIZATION_FAILED',
  'POLICY_VIOLATION',
]);

/** kafkajs wraps protocol errors (retries exceeded, non-retriable): find the broker's answer. */
function protocolErrorIn(error: unknown): KafkaJSProtocolError | undefined {
  for (let e = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e instanceof KafkaJSProtocolError) return e;
  }
  return undefined;
}

export function classifyProduceError(sink: string, topic: string, error: unknown): DeadLetterWriteError {
  const protocol = protocolErrorIn(error);
  if (protocol && PERMANENT_PRODUCE_ERRORS.has(protocol.type)) {
    const message =
      protocol.type === 'UNKNOWN_TOPIC_OR_PARTITION'
        ? `the topic ${topic} does not exist (create it: the dead-letter producer does not auto-create topics)`
        : `${protocol.type}: ${protocol.message}`;
    return new DeadLetterWriteError(sink, message, { retriable: false, cause: error });
  }
  // Retries exceeded: transient errors that may clear (a leader moving, a broker restarting).
  const retriable =
    error instanceof KafkaJSNumberOfRetriesExceeded || !(error instanceof KafkaJSError) || error.retriable;
  return new DeadLetterWriteError(sink, errorMessage(error), { retriable, cause: error });
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

/** Dead letters as JSON lines (bytes in base64), appended and fsynced per write. */
export class FileDeadLetterSink implements DeadLetterSink {
  readonly description: string;
  #handle: fsp.FileHandle | undefined;

  constructor(
    private readonly file: string,
    private readonly directorySync: DirectorySync = realDirectorySync,
  ) {
    this.description = `file ${file}`;
  }

  async write(letters: readonly DeadLetter[]): Promise<void> {
    if (letters.length === 0) return;
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
        detail: l.detail,
        key: l.key?.toString('base64') ?? null,
        value: l.value?.toString('base64') ?? null,
        headers: Object.fromEntries(
          Object.entries(l.headers ?? {}).map(([k, v]) => [k, Buffer.isBuffer(v) ? v.toString('base64') : v]),
        ),
      }),
    );
    // A failed or crashed append can leave a partial line: end it, so that the letters
    // written now (a retry of the same ones, often) each stay one readable line.
    await this.#handle.appendFile(`${torn ? '\n' : ''}${lines.join('\n')}\n`);
    await this.#handle.sync();
  }

  async close(): Promise<void> {
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
