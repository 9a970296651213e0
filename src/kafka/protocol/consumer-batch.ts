/**
 * kafkajs 2.2.4's consumer Batch (consumer/batch.js), the same fields and methods, built
 * without a BigInt `Long` per record and without copying the record array when nothing is
 * filtered out.
 *
 * Why: kafkajs builds a Batch for every partition of every fetch, and our fetch hook builds
 * one more to read the fetch's positions (fetched-batch.ts). Each build parsed every
 * record's offset into a `Long` (a BigInt and an object) to compare it with the fetch
 * offset, and copied the record array twice (the offset filter, then the control-record
 * filter): a fifth of the main thread's allocations on 1M JSON logs (~230 of ~1,100 MB,
 * V8's sampling heap profiler; bench/peers.md, section 9).
 *
 * Kept exactly: `messagesWithinOffset` holds the records at or above the fetch offset,
 * `messages` those of them that are neither aborted nor control records (kafkajs's own
 * `filterAbortedMessages` still decides the aborted ones). Offsets are compared as numbers
 * when both are exact in a double, else as kafkajs's Longs. When no record is dropped the
 * arrays are the fetched one itself: nothing in kafkajs or here writes to them.
 */

import { FetchedRecord } from '../../common/fetched-record';
import { replaceKafkajsModule } from './kafkajs-modules';

type Offset = string;

interface RawRecord {
  readonly offset: Offset;
  readonly isControlRecord?: boolean;
}

interface PartitionData {
  readonly partition: number;
  readonly highWatermark: string;
  readonly messages: readonly RawRecord[];
  readonly abortedTransactions?: readonly unknown[] | null;
}

interface KafkajsLong {
  gte(other: KafkajsLong): boolean;
}

/** What the Batch constructor sets, the same as kafkajs's. */
interface BatchFields {
  fetchedOffset: Offset;
  topic: string;
  partition: number;
  highWatermark: string;
  rawMessages: readonly RawRecord[];
  messagesWithinOffset: readonly RawRecord[];
  messages: readonly RawRecord[];
}

/* eslint-disable @typescript-eslint/no-require-imports -- kafkajs internals, pinned at 2.2.4 */
const Long = require('kafkajs/src/utils/long') as { fromValue(value: string): KafkajsLong };
const filterAbortedMessages = require('kafkajs/src/consumer/filterAbortedMessages') as (input: {
  messages: readonly RawRecord[];
  abortedTransactions?: readonly unknown[] | null;
}) => readonly RawRecord[];
/* eslint-enable @typescript-eslint/no-require-imports */

/** Whether offset `offset` is at or above `from` (both decimal int64 strings). */
export function atOrAbove(offset: Offset, from: Offset): boolean {
  const a = Number(offset);
  const b = Number(from);
  if (Number.isSafeInteger(a) && Number.isSafeInteger(b)) return a >= b;
  return Long.fromValue(offset).gte(Long.fromValue(from));
}

/** Whether `record` is at or above `from`; `fromNumber` is `from` as a number, when exact. */
function recordAtOrAbove(record: RawRecord, from: Offset, fromNumber: number | undefined): boolean {
  // A record read in place carries its offset as a number (src/common/fetched-record.ts): nothing to parse.
  if (fromNumber !== undefined && record instanceof FetchedRecord) return record.offsetNumber >= fromNumber;
  return atOrAbove(record.offset, from);
}

/** The records at or above `from`: `records` itself when every one is. */
function withinOffset(records: readonly RawRecord[], from: Offset): readonly RawRecord[] {
  const n = Number(from);
  const fromNumber = Number.isSafeInteger(n) ? n : undefined;
  for (let i = 0; i < records.length; i++) {
    if (!recordAtOrAbove(records[i]!, from, fromNumber))
      return records.filter((r) => recordAtOrAbove(r, from, fromNumber));
  }
  return records;
}

/** The records that are not control records: `records` itself when none is. */
function withoutControlRecords(records: readonly RawRecord[]): readonly RawRecord[] {
  for (let i = 0; i < records.length; i++) {
    if (records[i]!.isControlRecord) return records.filter((r) => !r.isControlRecord);
  }
  return records;
}

/** Sets on `batch` what kafkajs's Batch constructor sets, as it does. */
function fillBatch(
  batch: BatchFields,
  topic: string,
  fetchedOffset: Offset,
  partitionData: PartitionData,
): void {
  const { abortedTransactions, messages } = partitionData;
  batch.fetchedOffset = fetchedOffset;
  batch.topic = topic;
  batch.partition = partitionData.partition;
  batch.highWatermark = partitionData.highWatermark;
  batch.rawMessages = messages;
  batch.messagesWithinOffset = withinOffset(messages, fetchedOffset);
  batch.messages = withoutControlRecords(
    filterAbortedMessages({ messages: batch.messagesWithinOffset, abortedTransactions }),
  );
}

/**
 * A Batch class whose instances are kafkajs's (its prototype, so `isEmpty`, `lastOffset`,
 * `offsetLag` and the rest are kafkajs's own methods), filled by `fillBatch`.
 */
export function fastBatchClass<T extends object>(kafkajsBatch: {
  readonly prototype: T;
}): new (topic: string, fetchedOffset: Offset, partitionData: unknown) => T {
  function FastBatch(this: BatchFields, topic: string, fetchedOffset: Offset, partitionData: unknown) {
    fillBatch(this, topic, fetchedOffset, partitionData as PartitionData);
  }
  FastBatch.prototype = kafkajsBatch.prototype;
  return FastBatch as unknown as new (topic: string, fetchedOffset: Offset, partitionData: unknown) => T;
}

const BATCH_MODULE = 'kafkajs/src/consumer/batch';
const CONSUMER_GROUP_MODULE = 'kafkajs/src/consumer/consumerGroup';

/**
 * Makes kafkajs's consumer build its batches with `fastBatchClass`. Its consumer group
 * module takes the Batch class when it loads, which `require('kafkajs')` does: so this runs
 * before anything loads kafkajs (src/cli/main.ts imports this module first; kafkajs-modules.ts).
 */
export function installFastBatch(): boolean {
  return replaceKafkajsModule<{ readonly prototype: object }>(BATCH_MODULE, CONSUMER_GROUP_MODULE, (own) =>
    fastBatchClass(own),
  );
}

/** Whether kafkajs's consumer builds its batches with `fastBatchClass` in this process. */
export const FAST_BATCH_INSTALLED = installFastBatch();
