import { replaceKafkajsModule } from './kafkajs-modules';
import {
  decodeRecord,
  decodeRecordWithin,
  recordBases,
  type KafkajsDecoder,
  type RecordBases,
  type RecordBatchContext,
} from './record-batch';

/**
 * kafkajs 2.2.4's record batch decoder (protocol/recordBatch/v0/decoder.js), field for
 * field, with each record read in place: kafkajs cut every record out as a Buffer of its
 * own and wrapped it in a new Decoder before reading it (~115 MB of the main thread's
 * garbage per 1M records, V8's sampling heap profiler). Here the record's fields are read
 * from the batch's own decoder, which then moves to the record's end as kafkajs's did.
 *
 * Any record but the plain one is read from its cut as kafkajs read it (`decodeRecordInPlace`):
 * the same records, whatever a producer wrote.
 */

/* eslint-disable @typescript-eslint/no-require-imports -- kafkajs internals, pinned at 2.2.4 */
const Decoder = require('kafkajs/src/protocol/decoder') as new (buffer: Buffer) => BatchDecoder;
const { KafkaJSPartialMessageError } = require('kafkajs/src/errors') as {
  KafkaJSPartialMessageError: new (message: string) => Error;
};
const { lookupCodecByAttributes } = require('kafkajs/src/protocol/message/compression') as {
  lookupCodecByAttributes: (
    attributes: number,
  ) => { decompress(buffer: Buffer): Promise<Buffer> } | undefined;
};
const TimestampTypes = require('kafkajs/src/protocol/timestampTypes') as {
  LOG_APPEND_TIME: number;
  CREATE_TIME: number;
};
/* eslint-enable @typescript-eslint/no-require-imports */

/** kafkajs 2.2.4's Decoder, the part a record batch decoder reads. */
interface BatchDecoder extends KafkajsDecoder {
  readInt16(): number;
  readInt32(): number;
  readInt64(): { toString(): string };
  slice(length: number): BatchDecoder;
  forward(length: number): void;
  readAll(): Buffer;
  readArray<T>(reader: (decoder: BatchDecoder) => T): T[];
}

const TIMESTAMP_TYPE_FLAG_MASK = 0x8;
const TRANSACTIONAL_FLAG_MASK = 0x10;
const CONTROL_FLAG_MASK = 0x20;

/**
 * One record of the batch `decoder` is in; `decoder` then ends at the record's declared end,
 * as kafkajs's did. The plain record (its fields inside its declared bytes, at most 1,000
 * headers) is read where it lies (record-batch.ts, `decodeRecordWithin`); any other is read
 * from a cut of its own bytes, exactly as kafkajs reads it. No read of the first kind leaves the
 * record's bytes, so neither can read a neighbour's: a record whose length lies (kafkajs
 * 2.2.4's producer given a Uint8Array value writes such records; a broker accepts them in
 * compressed batches, which the codecs reframe: compression/record-framing.ts) reads as
 * kafkajs reads it, a value cut short or its error.
 */
export function decodeRecordInPlace(
  decoder: KafkajsDecoder,
  context: RecordBatchContext,
  bases: RecordBases | undefined,
): unknown {
  const at = decoder.offset;
  const buffer = decoder.buffer;
  const length = decoder.readVarInt();
  const start = decoder.offset;
  const end = start + length;
  if (bases !== undefined && length >= 0 && end <= buffer.length) {
    const record = decodeRecordWithin(buffer, start, end, context, bases);
    if (record !== undefined) {
      decoder.offset = end;
      return record;
    }
  }
  decoder.offset = at;
  return decodeRecord(new Decoder(readCut(decoder)), context);
}

/** kafkajs's cut of a record: its `readVarIntBytes` (null for a length of -1). */
function readCut(decoder: KafkajsDecoder): Buffer {
  const cut = decoder.readVarIntBytes();
  // kafkajs decoded a null cut too, and failed on it: the same error.
  if (cut === null) throw new TypeError('a record of length -1 (null) in a record batch');
  return cut;
}

async function decodeRecords(
  codec: ReturnType<typeof lookupCodecByAttributes>,
  recordsDecoder: BatchDecoder,
  context: RecordBatchContext,
): Promise<unknown[]> {
  const bases = recordBases(context);
  if (!codec) return recordsDecoder.readArray((decoder) => decodeRecordInPlace(decoder, context, bases));
  const length = recordsDecoder.readInt32();
  if (length <= 0) return [];
  // The compressed records are a view of the batch: the codec finds the batch around it (its CRC).
  const decompressed = new Decoder(await codec.decompress(recordsDecoder.readAll()));
  const records = new Array<unknown>(length);
  for (let i = 0; i < length; i++) records[i] = decodeRecordInPlace(decompressed, context, bases);
  return records;
}

/** kafkajs 2.2.4's `RecordBatchDecoder(fetchDecoder)`: the batch's header fields and its records. */
export async function decodeRecordBatch(fetchDecoder: BatchDecoder): Promise<Record<string, unknown>> {
  const firstOffset = fetchDecoder.readInt64().toString();
  const length = fetchDecoder.readInt32();
  const decoder = fetchDecoder.slice(length);
  fetchDecoder.forward(length);
  const remainingBytes = Buffer.byteLength(decoder.buffer);
  if (remainingBytes < length) {
    throw new KafkaJSPartialMessageError(
      `Tried to decode a partial record batch: remainingBytes(${remainingBytes}) < recordBatchLength(${length})`,
    );
  }
  const partitionLeaderEpoch = decoder.readInt32();
  // The magic byte was read by the fetch protocol to tell a record batch from a message set.
  const magicByte = decoder.readInt8();
  decoder.readInt32(); // the CRC: a compressed batch's is checked by its codec (compression/register.ts)
  const attributes = decoder.readInt16();
  const lastOffsetDelta = decoder.readInt32();
  const firstTimestamp = decoder.readInt64().toString();
  const maxTimestamp = decoder.readInt64().toString();
  const producerId = decoder.readInt64().toString();
  const producerEpoch = decoder.readInt16();
  const firstSequence = decoder.readInt32();
  const recordContext = {
    firstOffset,
    firstTimestamp,
    partitionLeaderEpoch,
    inTransaction: (attributes & TRANSACTIONAL_FLAG_MASK) > 0,
    isControlBatch: (attributes & CONTROL_FLAG_MASK) > 0,
    lastOffsetDelta,
    producerId,
    producerEpoch,
    firstSequence,
    maxTimestamp,
    timestampType:
      (attributes & TIMESTAMP_TYPE_FLAG_MASK) > 0
        ? TimestampTypes.LOG_APPEND_TIME
        : TimestampTypes.CREATE_TIME,
  };
  const records = await decodeRecords(lookupCodecByAttributes(attributes), decoder, {
    ...recordContext,
    magicByte,
  });
  // Only a batch that is its header alone: a count damaged to 0 in front of records (an
  // uncompressed batch's CRC is not checked here) must not move the position past them.
  const emptied = records.length === 0 && length === HEADER_ONLY_BATCH_LENGTH && lastOffsetDelta >= 0;
  return { ...recordContext, records: emptied ? [emptyBatchMarker(recordContext, magicByte)] : records };
}

/** A record batch's length field when the batch is its header alone (61 bytes in all). */
const HEADER_ONLY_BATCH_LENGTH = 49;

/**
 * What a record batch of no records stands for: a control record at the batch's last offset,
 * which kafkajs never delivers but counts in the batch's bounds, as it does an aborted record
 * (fetched-batch.ts), so the position moves past the batch as the Java consumer's does.
 *
 * The log cleaner keeps such a batch for a producer whose records were all superseded (an
 * idempotent or transactional producer's last batch keeps its sequence). kafkajs returned no
 * record for it and stayed at its offset; when the next batch was larger than a fetch of the
 * partition, every fetch answered that empty batch and the start of the next, cut short, and
 * the partition never moved again (test/integration/topic-offset-gaps.test.ts).
 */
function emptyBatchMarker(
  context: { readonly firstOffset: string; readonly lastOffsetDelta: number; readonly maxTimestamp: string },
  magicByte: number,
): Record<string, unknown> {
  return {
    magicByte,
    attributes: 0,
    timestamp: context.maxTimestamp,
    offset: (BigInt(context.firstOffset) + BigInt(context.lastOffsetDelta)).toString(),
    key: null,
    value: null,
    headers: {},
    isControlRecord: true,
    batchContext: context,
  };
}

const RECORD_BATCH_DECODER = 'kafkajs/src/protocol/recordBatch/v0/decoder';
const FETCH_MESSAGES_DECODER = 'kafkajs/src/protocol/requests/fetch/v4/decodeMessages';

/**
 * Makes kafkajs's fetch responses decode their record batches with `decodeRecordBatch`.
 * Its fetch decoder binds the record batch decoder when it is first loaded (at the first
 * fetch), so this must run before then (kafkajs-modules.ts).
 */
export function installRecordBatchDecoder(): boolean {
  return replaceKafkajsModule(RECORD_BATCH_DECODER, FETCH_MESSAGES_DECODER, () => decodeRecordBatch);
}
