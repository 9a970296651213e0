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
  /** No deliverable record: kafkajs will not call eachBatch for it. */
  isEmpty(): boolean;
}

type BatchConstructor = new (topic: string, fetchedOffset: string, partitionData: unknown) => FetchedBatch;

/** kafkajs's Batch class: built exactly as its consumer group builds each fetch's batches. */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const KafkajsBatch = require('kafkajs/src/consumer/batch') as BatchConstructor;

export function fetchedBatch(topic: string, fetchedOffset: string, partitionData: unknown): FetchedBatch {
  return new KafkajsBatch(topic, fetchedOffset, partitionData);
}

/** The last offset of the record batch a record came in (its own offset for the legacy format). */
function recordBatchEnd(record: FetchedRecord): number {
  const own = Number(record.offset);
  const header = record.batchContext;
  if (!header || !Number.isSafeInteger(header.lastOffsetDelta)) return own;
  return Math.max(own, Number(header.firstOffset) + header.lastOffsetDelta);
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
