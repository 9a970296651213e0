import { crc32c } from '@node-rs/crc32';
import { KafkaLanceError } from '../../../common/errors';
import type { CompressionName } from './codec';

/**
 * A compressed record batch that cannot be read: its CRC does not match its bytes, or
 * its codec refuses them. Not one bad record (the batch's records cannot be told apart),
 * so not a dead letter: the partition stops at the batch (fetch-positions.ts).
 */
export class CorruptCompressedBatchError extends KafkaLanceError {
  constructor(
    readonly codec: CompressionName,
    /** The batch's offsets, when its header could be read (message format v2). */
    readonly offsets: { readonly first: number; readonly last: number } | undefined,
    readonly detail: string,
    cause?: unknown,
  ) {
    const where = offsets ? `, offsets ${offsets.first}-${offsets.last}` : '';
    super('BATCH_CORRUPT', `${CORRUPT_BATCH_MESSAGE} (${codec}${where}): ${detail}`, {
      cause,
      context: { codec, ...(offsets ? { firstOffset: offsets.first, lastOffset: offsets.last } : {}) },
    });
  }
}

/** How every CorruptCompressedBatchError's message begins (kafkajs logs only the message). */
export const CORRUPT_BATCH_MESSAGE = 'corrupt compressed record batch';

// Message format v2 (the record batch), from its first byte.
const BATCH_LENGTH_AT = 8; // counts the bytes after itself
const LENGTH_COUNTED_FROM = 12;
const MAGIC_AT = 16;
const CRC_AT = 17; // CRC-32C of everything from the attributes on
const ATTRIBUTES_AT = 21;
const LAST_OFFSET_DELTA_AT = 23;
const RECORD_COUNT_AT = 57;
const RECORDS_AT = 61; // after the record count: the compressed records
const CODEC_MASK = 0x07;

/**
 * The record batch around a compressed records section that kafkajs hands a codec.
 * kafkajs 2.2.4 (pinned) passes a slice of the fetch response, so the batch header lies
 * just before it in the same memory; it is taken only if its magic, its length and its
 * codec bits all agree with the slice (otherwise undefined: a v0/v1 message set).
 */
export function enclosingBatch(records: Buffer, codecId: number): Buffer | undefined {
  if (records.byteOffset < RECORDS_AT) return undefined;
  const batch = Buffer.from(records.buffer, records.byteOffset - RECORDS_AT, RECORDS_AT + records.length);
  if (batch.readInt8(MAGIC_AT) !== 2) return undefined;
  if (batch.readInt32BE(BATCH_LENGTH_AT) !== batch.length - LENGTH_COUNTED_FROM) return undefined;
  if ((batch.readInt16BE(ATTRIBUTES_AT) & CODEC_MASK) !== codecId) return undefined;
  return batch;
}

export function batchOffsets(batch: Buffer): { first: number; last: number } {
  const first = Number(batch.readBigInt64BE(0));
  return { first, last: first + batch.readInt32BE(LAST_OFFSET_DELTA_AT) };
}

/** How many records the batch's header says it holds. */
export function batchRecordCount(batch: Buffer): number {
  return batch.readInt32BE(RECORD_COUNT_AT);
}

/** The header's last offset delta, as written (its offsets as doubles lose it past 2^53). */
export function batchLastOffsetDelta(batch: Buffer): number {
  return batch.readInt32BE(LAST_OFFSET_DELTA_AT);
}

/**
 * kafkajs does not check batch CRCs; a damaged lz4 or zstd stream without checksums
 * decompresses to other bytes without an error, so the CRC is checked before.
 */
export function batchCrcMatches(batch: Buffer): boolean {
  return crc32c(batch.subarray(ATTRIBUTES_AT)) === batch.readUInt32BE(CRC_AT);
}
