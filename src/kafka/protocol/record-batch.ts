/**
 * kafkajs 2.2.4 decodes every record's offset and timestamp through its BigInt `Long`
 * (protocol/recordBatch/record/v0/decoder.js): `Long.fromValue(firstOffset)` parses the
 * batch's first offset from its string for each record, adds the delta and prints the
 * sum; the timestamp delta is read as a varlong one BigInt per byte. On the main thread
 * that was ~8 % of its time (bench/hot-path-levers.md). `decodeRecord` gives the same
 * record with plain numbers whenever they are exact (every offset and timestamp below
 * 2^53), and kafkajs's own arithmetic otherwise.
 */

import { FetchedRecord } from '../../common/fetched-record';
import { replaceKafkajsModule } from './kafkajs-modules';

/** kafkajs 2.2.4's Decoder, the part a record decoder reads. */
export interface KafkajsDecoder {
  readonly buffer: Buffer;
  offset: number;
  readInt8(): number;
  readVarInt(): number;
  readVarLong(): KafkajsLong;
  readVarIntBytes(): Buffer | null;
}

interface KafkajsLong {
  add(other: KafkajsLong | number): KafkajsLong;
  toString(): string;
}

interface KafkajsLongClass {
  fromValue(value: string | number | KafkajsLong): KafkajsLong;
}

/** The record batch header kafkajs passes to each record (recordBatch/v0/decoder.js). */
export interface RecordBatchContext {
  readonly firstOffset: string;
  readonly firstTimestamp: string;
  readonly magicByte: number;
  readonly isControlBatch?: boolean;
  readonly timestampType: number;
  readonly maxTimestamp: string;
}

type RecordDecoderFunction = (decoder: KafkajsDecoder, batchContext?: RecordBatchContext) => unknown;

/* eslint-disable @typescript-eslint/no-require-imports -- kafkajs internals, pinned at 2.2.4 */
const Long = require('kafkajs/src/utils/long') as KafkajsLongClass;
const TimestampTypes = require('kafkajs/src/protocol/timestampTypes') as { LOG_APPEND_TIME: number };
/* eslint-enable @typescript-eslint/no-require-imports */

/**
 * A varlong of at most 7 bytes (49 bits before the zigzag) as a number, else undefined
 * with the decoder where it was: such a value is exact in a double.
 */
function readShortVarLong(decoder: KafkajsDecoder): number | undefined {
  const read = shortVarlongAt(decoder.buffer, decoder.offset, decoder.buffer.length);
  if (read < 0) return undefined;
  decoder.offset += read % 8;
  return zigzagNumber(Math.floor(read / 8));
}

/** `first` (a decimal int64 string) + `delta`, printed, exactly as kafkajs's Long does. */
function offsetFrom(first: string, delta: number | KafkajsLong): string {
  if (typeof delta === 'number') {
    const sum = Number(first) + delta;
    if (Number.isSafeInteger(sum) && Number.isSafeInteger(Number(first))) return String(sum);
  }
  return Long.fromValue(first).add(delta).toString();
}

/**
 * At most this many headers of a record are decoded; the rest are skipped unread. Headers
 * reach nothing but a dead letter (a copy of the record), so dropping the excess loses no
 * row, and bounds what one record costs the main thread (kafkajs decodes every header into
 * an object of its own, before any of our code can refuse the record).
 */
export const MAX_HEADERS_PER_RECORD = 1_000;
/** Set on a record whose headers beyond MAX_HEADERS_PER_RECORD were dropped: how many (a decimal string). */
export const DROPPED_HEADERS = '__kafka_lance.headers.dropped';

/**
 * The headers of every record that has none: one object, frozen so that nothing can give one
 * record a header through it. Most records have none; an object each was ~45 MB of the main
 * thread's garbage per 1M records (V8's sampling heap profiler).
 */
const NO_HEADERS: Record<string, unknown> = Object.freeze({});

/**
 * kafkajs's fold of a record's headers (a repeated key collects its values in an array;
 * none: `{}`), in one object mutated in place: kafkajs's own fold copies the object once per
 * header, quadratic (20,000 keys took 80 s of the main thread, past the session timeout).
 * Keys are own properties whatever they are named (`__proto__`, `constructor`).
 */
function readHeaders(decoder: KafkajsDecoder): Record<string, unknown> {
  const count = decoder.readVarInt();
  if (count <= 0) return NO_HEADERS;
  const headers: Record<string, unknown> = {};
  for (let i = 0; i < count; i++) {
    if (i === MAX_HEADERS_PER_RECORD) {
      while (i < count && skipHeader(decoder)) i++;
      setOwn(headers, DROPPED_HEADERS, Buffer.from(String(count - MAX_HEADERS_PER_RECORD)));
      break;
    }
    foldHeader(headers, readHeaderKey(decoder), readHeaderValue(decoder));
  }
  return headers;
}

/** Adds one header as kafkajs folds them: a repeated key collects its values in an array. */
function foldHeader(headers: Record<string, unknown>, key: string, value: Buffer | null): void {
  const seen = Object.hasOwn(headers, key) ? headers[key] : undefined;
  if (seen === undefined) setOwn(headers, key, value);
  else if (Array.isArray(seen)) seen.push(value);
  else setOwn(headers, key, [seen, value]);
}

/**
 * A header's key, as kafkajs reads it (a varint length, then UTF-8) while its length is not
 * negative. A broker refuses negative key lengths; from anywhere else one reads as an empty
 * key and takes no bytes: kafkajs would move its decoder back by it.
 */
function readHeaderKey(decoder: KafkajsDecoder): string {
  const length = decoder.readVarInt();
  if (length <= 0) return '';
  const at = decoder.offset;
  decoder.offset = at + length;
  return decoder.buffer.toString('utf8', at, Math.min(at + length, decoder.buffer.length));
}

/**
 * A header's value, as kafkajs reads it (a view of its bytes; null for -1), except that any
 * negative length is null and takes no bytes, as the broker and the Java consumer read it.
 * kafkajs moved its decoder back by such a length, and a broker accepts it: one record of
 * 1,000 headers whose first value length undid its ~400 KB key had every later key read
 * those bytes again (~400 MB of strings a record; six in a 2.6 KB gzip batch ran the main
 * thread out of heap, again on every restart). Read forward only, a record's headers cost
 * at most its own bytes.
 */
function readHeaderValue(decoder: KafkajsDecoder): Buffer | null {
  const length = decoder.readVarInt();
  if (length < 0) return null;
  const at = decoder.offset;
  decoder.offset = at + length;
  return decoder.buffer.slice(at, at + length);
}

function setOwn(headers: Record<string, unknown>, key: string, value: unknown): void {
  // An assignment makes an own property of any key but `__proto__`, whose inherited setter
  // would change the object's prototype instead; defining a property costs more.
  if (key === '__proto__')
    Object.defineProperty(headers, key, { value, enumerable: true, writable: true, configurable: true });
  else headers[key] = value;
}

/**
 * Moves the decoder past one header (a varint-length key and value; -1 is a null value);
 * false once it is outside the record's bytes, where nothing is left to skip. A count
 * beyond the record's bytes then ends the skipping, rather than spinning on nothing (a
 * negative length before it can have moved the decoder ~2^31 bytes back: seconds of the
 * main thread) or failing the record, which kafkajs reads (its reads past the end are zeros).
 */
function skipHeader(decoder: KafkajsDecoder): boolean {
  for (let field = 0; field < 2; field++) {
    const length = decoder.readVarInt();
    if (length > 0) decoder.offset += length;
  }
  return decoder.offset >= 0 && decoder.offset <= decoder.buffer.length;
}

/** kafkajs 2.2.4's record decoder (v0), field for field, with exact numbers where they suffice. */
export const decodeRecord: RecordDecoderFunction = (decoder, batchContext) => {
  const {
    firstOffset,
    firstTimestamp,
    magicByte,
    isControlBatch = false,
    timestampType,
    maxTimestamp,
  } = batchContext ?? ({} as Partial<RecordBatchContext>);
  const attributes = decoder.readInt8();
  const timestampDelta = readShortVarLong(decoder) ?? decoder.readVarLong();
  const timestamp =
    timestampType === TimestampTypes.LOG_APPEND_TIME && maxTimestamp
      ? maxTimestamp
      : offsetFrom(firstTimestamp as string, timestampDelta);
  const offsetDelta = decoder.readVarInt();
  const offset = offsetFrom(firstOffset as string, offsetDelta);
  const key = decoder.readVarIntBytes();
  const value = decoder.readVarIntBytes();
  const headers = readHeaders(decoder);
  return {
    magicByte,
    attributes,
    timestamp,
    offset,
    key,
    value,
    headers,
    isControlRecord: isControlBatch,
    batchContext,
  };
};

/**
 * A batch's first offset and timestamps as numbers, when each is exact (a canonical decimal
 * below 2^53): what records read in place add their deltas to. Undefined otherwise: its
 * records are read as kafkajs reads them, with its Long arithmetic.
 */
export interface RecordBases {
  readonly firstOffset: number;
  readonly firstTimestamp: number;
  /** The batch's max timestamp, every record's under log-append time; undefined if not exact. */
  readonly appendTime: number | undefined;
}

export function recordBases(context: RecordBatchContext): RecordBases | undefined {
  const firstOffset = exactNumber(context.firstOffset);
  const firstTimestamp = exactNumber(context.firstTimestamp);
  if (firstOffset === undefined || firstTimestamp === undefined) return undefined;
  return { firstOffset, firstTimestamp, appendTime: exactNumber(context.maxTimestamp) };
}

function exactNumber(decimal: string): number | undefined {
  const n = Number(decimal);
  return Number.isSafeInteger(n) && String(n) === decimal ? n : undefined;
}

/**
 * The record whose body is `buffer[start, end)`, read where it lies: what `decodeRecord` gives
 * for a Decoder over a cut of exactly those bytes, without the cut and the Decoder (~115 MB of
 * the main thread's garbage per 1M records), with its offset and timestamp as numbers
 * (src/common/fetched-record.ts). Undefined (nothing read) when the record is not the plain case: a read
 * that would leave its bytes (a length that lies: kafkajs's cut then reads past its end as
 * zeros), a varint longer than 4 bytes (kafkajs's own arithmetic wraps there) or a varlong
 * longer than 7, more headers than the cap, a negative header key length, or an offset or
 * timestamp not exact in a double. The caller then
 * reads its cut as kafkajs does. Every read is checked against `end` before it is made, so no
 * byte outside the record is read.
 */
export function decodeRecordWithin(
  buffer: Buffer,
  start: number,
  end: number,
  batchContext: RecordBatchContext,
  bases: RecordBases,
): FetchedRecord | undefined {
  if (start >= end) return undefined;
  const attributes = (buffer[start]! << 24) >> 24; // readInt8
  let at = start + 1;
  const time = shortVarlongAt(buffer, at, end);
  if (time < 0) return undefined;
  at += time % 8;
  const timestampDelta = zigzagNumber(Math.floor(time / 8));
  const delta = shortVarintAt(buffer, at, end);
  if (delta < 0) return undefined;
  at += delta & 7;
  const offsetDelta = zigzag32(delta >>> 3);
  const keyField = fieldAt(buffer, at, end);
  if (keyField < 0) return undefined;
  const key = fieldBytes(buffer, at, keyField);
  at = fieldEnd(at, keyField);
  const valueField = fieldAt(buffer, at, end);
  if (valueField < 0) return undefined;
  const value = fieldBytes(buffer, at, valueField);
  at = fieldEnd(at, valueField);
  const headerCount = shortVarintAt(buffer, at, end);
  if (headerCount < 0) return undefined;
  at += headerCount & 7;
  const count = zigzag32(headerCount >>> 3);
  let headers = NO_HEADERS;
  // Beyond the cap, the cut's reader drops the rest and says how many.
  if (count > MAX_HEADERS_PER_RECORD) return undefined;
  if (count > 0) {
    headers = {};
    for (let h = 0; h < count; h++) {
      // A null key (the cut's reader: an empty one) is not the plain case.
      const keyField = fieldAt(buffer, at, end);
      if (keyField < 8) return undefined;
      const keyStart = at + (keyField & 7);
      const key = buffer.toString('utf8', keyStart, fieldEnd(at, keyField));
      at = fieldEnd(at, keyField);
      const valueField = fieldAt(buffer, at, end);
      if (valueField < 0) return undefined;
      foldHeader(headers, key, fieldBytes(buffer, at, valueField));
      at = fieldEnd(at, valueField);
    }
  }
  const offset = bases.firstOffset + offsetDelta;
  // As decodeRecord: the batch's max timestamp under log-append time (when it has one).
  const timestamp =
    batchContext.timestampType === TimestampTypes.LOG_APPEND_TIME && batchContext.maxTimestamp
      ? bases.appendTime
      : bases.firstTimestamp + timestampDelta;
  if (!Number.isSafeInteger(offset) || timestamp === undefined || !Number.isSafeInteger(timestamp))
    return undefined;
  return new FetchedRecord(
    batchContext.magicByte,
    attributes,
    offset,
    timestamp,
    key,
    value,
    headers,
    batchContext.isControlBatch ?? false,
    batchContext,
  );
}

/**
 * The varint of at most 4 bytes at `at`, before `end`, as its raw (zigzag) value × 8 + its
 * length in bytes; -1 when it is longer or runs to `end`. Both in one number: no object per read.
 */
function shortVarintAt(buffer: Buffer, at: number, end: number): number {
  let raw = 0;
  for (let i = 0; i < 4; i++) {
    if (at + i >= end) return -1;
    const byte = buffer[at + i]!;
    raw |= (byte & 0x7f) << (7 * i);
    if (byte < 0x80) return raw * 8 + i + 1;
  }
  return -1;
}

/**
 * The length-prefixed field at `at` (a key, a value, a header's key or value), before `end`:
 * (its size + 1) × 8 + its prefix's length in bytes, a null field (size -1) as 0 × 8; -1 when
 * its prefix is not a short varint, its size is below -1 or its bytes run past `end`.
 */
function fieldAt(buffer: Buffer, at: number, end: number): number {
  const prefix = shortVarintAt(buffer, at, end);
  if (prefix < 0) return -1;
  const size = zigzag32(prefix >>> 3);
  const bytesAt = at + (prefix & 7);
  return size < -1 || size > end - bytesAt ? -1 : (size + 1) * 8 + (prefix & 7);
}

/** The bytes of the field `fieldAt` found at `at` (a view), or null. */
function fieldBytes(buffer: Buffer, at: number, field: number): Buffer | null {
  const size = (field >>> 3) - 1;
  const bytesAt = at + (field & 7);
  return size === -1 ? null : buffer.slice(bytesAt, bytesAt + size);
}

/** Where the field `fieldAt` found at `at` ends. */
function fieldEnd(at: number, field: number): number {
  return at + (field & 7) + Math.max((field >>> 3) - 1, 0);
}

/** As shortVarintAt, for a varlong of at most 7 bytes (49 bits: × 8 stays exact in a double). */
function shortVarlongAt(buffer: Buffer, at: number, end: number): number {
  let raw = 0;
  let scale = 1;
  for (let i = 0; i < 7; i++) {
    if (at + i >= end) return -1;
    const byte = buffer[at + i]!;
    raw += (byte & 0x7f) * scale;
    if (byte < 0x80) return raw * 8 + i + 1;
    scale *= 128;
  }
  return -1;
}

/** kafkajs's Decoder.decodeZigZag, for raw values below 2^28. */
const zigzag32 = (raw: number): number => (raw >>> 1) ^ -(raw & 1);
/** Zigzag for raw values up to 2^49 (beyond int32 arithmetic). */
const zigzagNumber = (raw: number): number => (raw % 2 === 0 ? raw / 2 : -(raw + 1) / 2);

const RECORD_DECODER = 'kafkajs/src/protocol/recordBatch/record/v0/decoder';
const RECORD_BATCH_DECODER = 'kafkajs/src/protocol/recordBatch/v0/decoder';

/**
 * Makes kafkajs's record batch decoder use `decodeRecord`. It binds its record decoder
 * when it is first loaded (at the first fetch), so this must run before then
 * (kafkajs-modules.ts).
 */
export function installRecordDecoder(): boolean {
  return replaceKafkajsModule(RECORD_DECODER, RECORD_BATCH_DECODER, () => decodeRecord);
}
