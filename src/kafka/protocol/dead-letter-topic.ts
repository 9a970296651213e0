import { CompressionTypes, type Producer } from 'kafkajs';
import { DeadLetterWriteError, errorMessage } from '../../common/errors';
import type { DeadLetter, DeadLetterSink } from '../../dead-letters/dead-letter';
import { isRefusedAsTooLarge, produceFailureOf } from './kafka-errors';
import { scrubSecrets } from '../../common/redaction';

/** Dead letters to a Kafka topic, with Kafka Connect's `__connect.errors.*` headers. */
export class KafkaDeadLetterSink implements DeadLetterSink {
  readonly description: string;

  constructor(
    private readonly producer: Producer,
    private readonly topic: string,
    private readonly connectorName: string,
    private readonly contextHeaders: boolean,
    private readonly compression: CompressionTypes = CompressionTypes.None,
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
        compression: this.compression,
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
      if (letters.length > 1 && isRefusedAsTooLarge(error)) {
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
    '__connect.errors.exception.message': scrubSecrets(l.detail),
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

export function classifyProduceError(sink: string, topic: string, error: unknown): DeadLetterWriteError {
  const failure = produceFailureOf(error);
  if (failure.kind === 'permanent') {
    const message =
      failure.type === 'UNKNOWN_TOPIC_OR_PARTITION'
        ? `the topic ${topic} does not exist (create it: the dead-letter producer does not auto-create topics)`
        : `${failure.type}: ${failure.message}`;
    return new DeadLetterWriteError(sink, message, { retriable: false, cause: error });
  }
  return new DeadLetterWriteError(sink, errorMessage(error), { retriable: failure.retriable, cause: error });
}
