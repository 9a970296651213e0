import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import type { IHeaders, Producer } from 'kafkajs';
import { mkdirDurably, realDirectorySync, type DirectorySync } from '../common/fs-durable';
import type { DeadLetterReason } from '../decode/dead-letter-reason';

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
 * handled and may be committed.
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
    if (letters.length === 0) return;
    await this.producer.send({
      topic: this.topic,
      acks: -1,
      messages: letters.map((l) => ({
        key: l.key,
        value: l.value,
        timestamp: l.timestamp,
        headers: this.contextHeaders ? { ...l.headers, ...connectHeaders(l, this.connectorName) } : l.headers,
      })),
    });
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
    if (!this.#handle) {
      const dir = path.dirname(this.file);
      await mkdirDurably(dir, this.directorySync);
      const handle = await fsp.open(this.file, 'a');
      // The file may be new: its name must be durable before the letters in it count
      // as handled (their offsets get committed). Once per open, whether new or not.
      try {
        await this.directorySync.syncDirectory(dir);
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
    await this.#handle.appendFile(`${lines.join('\n')}\n`);
    await this.#handle.sync();
  }

  async close(): Promise<void> {
    await this.#handle?.close();
    this.#handle = undefined;
  }
}
