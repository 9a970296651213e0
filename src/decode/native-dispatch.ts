import type { DeadLetterVerdict } from '../dead-letters/dead-letter-reason';
import { minuteKeyOf, type MinuteKey } from '../staging/part-name';
import { BatchColumns } from './batch-columns';
import type { DecodedBatch } from './decoded-batch';
import type { FieldState } from './field-state';
import type { NativeColumns } from './native-json-columns';
import type { RawMessage } from './raw-message';
import { MAX_TIMESTAMP_MS, MIN_TIMESTAMP_MS } from './timestamp';

/** One fetched batch of a partition. */
export interface FetchedBatch {
  readonly topic: string;
  readonly partition: number;
  readonly messages: readonly RawMessage[];
  /** The incarnation of the topic the messages were fetched from ('' when unknown). */
  readonly topicId: string;
}

/** A native reader of a batch's values into the decoder's columns (JSON, or one registry writer's). */
export interface NativeBatchReader {
  decode(messages: readonly RawMessage[]): NativeColumns;
}

/** The decoder's columns and settings the native path needs. */
export interface NativeSetup {
  /** The declared fields, in column order (the native decoder's columns are theirs). */
  readonly fields: readonly FieldState[];
  readonly maxRecordBytes: number;
  readonly eventTimeField: string | undefined;
  /** Read once the batch is decoded: the ingest minute when there is no event-time field. */
  readonly clock: () => number;
  /**
   * A native decoder threw (a panic in Rust arrives as an error): the batch is the TypeScript
   * decoder's, whose rows the native one only ever repeats, instead of failing on every retry.
   */
  readonly onNativeFailure?: (error: unknown) => void;
}

/**
 * The batch through a native decoder, or undefined when a record needs the TypeScript
 * decoder's row (the caller then decodes the whole batch with it). `readerFor` sees the
 * records the native decoder is to read and may decline them all (undefined) before anything
 * is decoded. Every
 * record the native decoder does not take (rejected, or not plainly stageable: null,
 * too large, a wild Kafka timestamp) is decided alone by `decodeAlone`, the TypeScript
 * decoder: its verdict, if any, joins the batch's; the rows are the native decoder's,
 * in offset order.
 */
export function decodeNatively(
  readerFor: (candidates: readonly RawMessage[]) => NativeBatchReader | undefined,
  fetched: FetchedBatch,
  setup: NativeSetup,
  decodeAlone: (message: RawMessage) => DecodedBatch,
): DecodedBatch | undefined {
  const { topic, partition, messages, topicId } = fetched;
  const plain = (m: RawMessage) =>
    m.value !== null &&
    (m.key?.byteLength ?? 0) + m.value.byteLength <= setup.maxRecordBytes &&
    Number.isSafeInteger(m.timestampNumber) &&
    m.timestampNumber >= MIN_TIMESTAMP_MS &&
    m.timestampNumber <= MAX_TIMESTAMP_MS;
  // Index loops and no copy when every record is plain: this runs once per record of every
  // batch, and iterators and copied arrays were ~90 MB of the main thread's garbage per 1M
  // records (V8's sampling heap profiler).
  let allPlain = true;
  for (let i = 0; i < messages.length && allPlain; i++) allPlain = plain(messages[i]!);
  const candidates = allPlain ? messages : messages.filter(plain);
  const native = readerFor(candidates);
  if (native === undefined) return undefined;
  let decoded: NativeColumns;
  try {
    decoded = native.decode(candidates);
  } catch (error) {
    setup.onNativeFailure?.(error);
    return undefined;
  }
  const rejected =
    decoded.rejected.length > 0 ? new Set(decoded.rejected.map((i) => candidates[i]!)) : undefined;
  const deadLetters: DeadLetterVerdict[] = [];
  if (!allPlain || rejected !== undefined) {
    for (let i = 0; i < messages.length; i++) {
      const message = messages[i]!;
      if (plain(message) && !rejected?.has(message)) continue;
      const alone = decodeAlone(message);
      if (alone.rows > 0) return undefined;
      deadLetters.push(...alone.deadLetters);
    }
  }
  const columns = new BatchColumns(setup.fields, false, undefined, false, topic, topicId);
  for (let i = 0; i < candidates.length; i++) {
    const message = candidates[i]!;
    if (rejected === undefined || !rejected.has(message)) columns.appendSystem(partition, message, 0, null);
  }
  const batch = columns.finishWith(decoded.children);
  let minute: MinuteKey | MinuteKey[] = minuteKeyOf(setup.clock());
  if (setup.eventTimeField !== undefined) {
    const at = setup.fields.findIndex((f) => f.name === setup.eventTimeField);
    const times = decoded.children[at]!.values as BigInt64Array;
    minute = Array.from({ length: decoded.rows }, (_, i) => minuteKeyOf(Number(times[i])));
  }
  return { batch, minute, earlier: [], deadLetters, rows: decoded.rows };
}
