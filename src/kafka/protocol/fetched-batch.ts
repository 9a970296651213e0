/**
 * How far one fetch of a partition moves the consumer, read from kafkajs 2.2.4's own
 * Batch (consumer/batch.js; kafkajs is pinned for this and the coordinator hook).
 *
 * A partition's offsets have gaps that no record fills: the log cleaner removes
 * superseded records from a compacted topic but keeps each rewritten record batch's
 * last offset; aborted transactions and commit/abort markers are in the log but never
 * delivered under read_committed. kafkajs hands eachBatch only the deliverable records,
 * so "the last delivered offset + 1" can point into such a gap, and a fetch that holds
 * nothing deliverable never reaches eachBatch at all. The next position must come from
 * what the fetch covered, never from its last message.
 */

import { fastBatchClass } from './consumer-batch';
import { isReproducedKafkajs } from './kafkajs-modules';
import { installRecordDecoder } from './record-batch';
import { installRecordBatchDecoder } from './record-batch-decoder';

/** A record as kafkajs decodes it, with the header of the record batch it came in. */
interface FetchedRecord {
  readonly offset: string;
  /** Absent for the legacy message format (magic 0/1). */
  readonly batchContext?: { readonly firstOffset: string; readonly lastOffsetDelta: number };
}

/** kafkajs 2.2.4's Batch, beyond its public typing. */
export interface FetchedBatch {
  readonly topic: string;
  readonly partition: number;
  readonly fetchedOffset: string;
  /** Every record the fetch returned, also those below the fetch offset (whole record batches). */
  readonly rawMessages: readonly FetchedRecord[];
  /** The records at or above the fetch offset, aborted ones and control markers included. */
  readonly messagesWithinOffset: readonly FetchedRecord[];
  /** The deliverable records (what eachBatch gets). */
  readonly messages: readonly FetchedRecord[];
  /** No deliverable record: kafkajs will not call eachBatch for it. */
  isEmpty(): boolean;
}

/**
 * kafkajs's Batch class, filled as kafkajs fills it without a Long per record
 * (consumer-batch.ts), on the release it reproduces: the same batches its consumer group
 * builds from each fetch.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const ownBatch = require('kafkajs/src/consumer/batch') as {
  readonly prototype: FetchedBatch;
} & (new (topic: string, fetchedOffset: string, partitionData: unknown) => FetchedBatch);
const KafkajsBatch = isReproducedKafkajs() ? fastBatchClass(ownBatch) : ownBatch;

// kafkajs decodes the records these batches hold: with plain numbers for offsets and
// timestamps (record-batch.ts), the plain ones read in place in their batch
// (record-batch-decoder.ts), installed before the first fetch loads its decoders. False when
// kafkajs's own decoders stay (the same records, slower): the replica says so.
export const RECORD_DECODER_INSTALLED = installRecordDecoder() && installRecordBatchDecoder();

export function fetchedBatch(topic: string, fetchedOffset: string, partitionData: unknown): FetchedBatch {
  return new KafkajsBatch(topic, fetchedOffset, partitionData);
}

/**
 * The last offset of the record batch a record came in (its own offset for the legacy
 * format). The batch header's, never the record's own: the broker checks a header's
 * offsets against its record count, and a record read out of a batch whose lengths lie
 * can carry any offset (compression/record-framing.ts); past the header's end it would
 * move the position over records never read.
 */
function recordBatchEnd(record: FetchedRecord): number {
  const header = record.batchContext;
  if (!header || !Number.isSafeInteger(header.lastOffsetDelta)) return Number(record.offset);
  return Number(header.firstOffset) + header.lastOffsetDelta;
}

/**
 * The last offset the fetch accounts for: every offset from the fetch offset through
 * it is either in the batch (delivered, aborted, or a control marker) or holds no
 * record any more (removed by compaction from a record batch the fetch returned
 * whole). Undefined when the fetch returned no record at all (nothing is known).
 *
 * A record batch is decoded whole or not at all (kafkajs drops a batch cut short by
 * the fetch size), so the end of the last record batch is safe to move past.
 */
export function coveredThrough(batch: FetchedBatch): number | undefined {
  const fetchedFrom = Number(batch.fetchedOffset);
  const within = batch.messagesWithinOffset;
  const last = within[within.length - 1];
  if (last) return recordBatchEnd(last);
  if (batch.rawMessages.length === 0) return undefined;
  // Every record returned lies below the fetch offset: the record batch holding the fetch
  // offset lost its later records to compaction. Its end is the first offset after the
  // gap; kafkajs itself would step one offset per fetch (Batch.lastOffset()).
  let end = fetchedFrom;
  for (const r of batch.rawMessages) end = Math.max(end, recordBatchEnd(r));
  return end;
}

/** A record of a fetch answer as kafkajs 2.2.4 decodes it, with what the abort filter reads. */
interface AnsweredRecord {
  readonly offset: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  isControlRecord: boolean;
  readonly batchContext?: {
    readonly firstOffset: string;
    readonly lastOffsetDelta: number;
    readonly producerId: string;
    readonly inTransaction: boolean;
    readonly isControlBatch?: boolean;
  };
}

/** One partition of a fetch answer, before kafkajs builds its Batch from it. */
export interface AnsweredPartition {
  readonly partition: number;
  /** The log end the broker reported (kafkajs decodes it as a decimal string). */
  readonly highWatermark?: string;
  abortedTransactions?: readonly { readonly producerId: string; readonly firstOffset: string }[];
  readonly messages?: readonly AnsweredRecord[];
}

/**
 * Hides the records of aborted transactions the way the Java consumer does, before
 * kafkajs sees the answer: kafkajs 2.2.4's filter (consumer/filterAbortedMessages.js)
 * takes the broker's aborted-transaction list in the order given and starts at most one
 * transaction per record, so with several transactional producers on a partition (Flink,
 * Kafka Streams after a failover) it lets aborted records through, or drops committed
 * ones. Positions now move past what kafkajs filters, so either is final.
 *
 * Java's rule (Fetcher's CompletedFetch): for each record batch of a producer, every
 * aborted transaction whose first offset is at or below the batch's last offset is open
 * for its producer; a transactional batch of a producer with an open aborted transaction
 * is aborted; that producer's abort marker closes it. Aborted records are marked as
 * control records: kafkajs then drops them from the delivered messages but keeps them in
 * the batch's bounds, so the position still moves past them (coveredThrough). The list
 * is emptied so that kafkajs's own filter does nothing.
 */
export function hideAbortedRecords(data: AnsweredPartition): void {
  const aborted = data.abortedTransactions;
  if (!aborted || aborted.length === 0) return;
  const pending = [...aborted].sort((a, b) => Number(a.firstOffset) - Number(b.firstOffset));
  const open = new Set<string>();
  let next = 0;
  let batch: AnsweredRecord['batchContext'];
  for (const record of data.messages ?? []) {
    const context = record.batchContext;
    if (!context) continue;
    if (context !== batch) {
      batch = context;
      const last = Number(context.firstOffset) + context.lastOffsetDelta;
      while (next < pending.length && Number(pending[next]!.firstOffset) <= last) {
        open.add(pending[next]!.producerId);
        next += 1;
      }
    }
    if (context.isControlBatch) {
      // A control record's key: version (int16) then type (int16): 0 abort, 1 commit.
      if (record.key && record.key.length >= 4 && record.key.readInt16BE(2) === 0)
        open.delete(context.producerId);
    } else if (context.inTransaction && open.has(context.producerId)) {
      record.isControlRecord = true;
    }
  }
  data.abortedTransactions = [];
}
