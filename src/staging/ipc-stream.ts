import { Message, MessageHeader, RecordBatchReader, RecordBatchStreamWriter } from 'apache-arrow';
import type { RecordBatch, Schema } from 'apache-arrow';
import { errorMessage } from '../common/errors';
import { batchBoundsProblem } from './batch-bounds';
import { metadataProblem } from './ipc-metadata-check';

/**
 * Arrow IPC stream framing, done by hand where apache-arrow's writer cannot help:
 * a part is appended one durability tick at a time, so we need the bytes of a
 * tick's batches alone (no repeated schema), and after a crash we need to know
 * where the last whole message ends.
 *
 * Each message is: 0xFFFFFFFF, int32 metadata length, flatbuffer metadata, body.
 * The end-of-stream marker is 0xFFFFFFFF followed by a zero length.
 */
export const END_OF_STREAM = Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0);

/** The schema message that opens every stream. */
export function encodeSchema(schema: Schema): Uint8Array {
  const writer = new RecordBatchStreamWriter();
  writer.reset(undefined, schema);
  return writer.toUint8Array(true);
}

/** The record batch messages of `batches`, without the schema message and without end-of-stream. */
export function encodeBatches(schema: Schema, batches: readonly RecordBatch[]): Uint8Array {
  const writer = new RecordBatchStreamWriter();
  writer.reset(undefined, schema);
  const schemaLength = writer.toUint8Array(true).byteLength;
  for (const batch of batches) writer.write(batch);
  return writer.toUint8Array(true).subarray(schemaLength);
}

/**
 * The same bytes as `encodeBatches`, as the writer produced them: each message's prefix
 * and metadata, and its body as views of the batches' own column buffers with their
 * padding, for one vectored write. Joining them (`toUint8Array`) copied every staged
 * byte once more: 11 % of a staging worker in the bench's profile. apache-arrow 18.1's
 * writer keeps what it wrote, in order, in its sink's queue (`_sink._values`, internal);
 * when that is not there (another release), the joined bytes are the only chunk.
 */
export function encodeBatchChunks(schema: Schema, batches: readonly RecordBatch[]): Uint8Array[] {
  const writer = new RecordBatchStreamWriter();
  writer.reset(undefined, schema);
  const written = (writer as unknown as { _sink?: { _values?: unknown } })._sink?._values;
  if (!Array.isArray(written)) return [encodeBatches(schema, batches)];
  const schemaChunks = written.length;
  for (const batch of batches) writer.write(batch);
  return (written as Uint8Array[]).slice(schemaChunks);
}

/** `chunks` without their first `skip` bytes (views, no copy). */
export function chunksAfter(chunks: readonly Uint8Array[], skip: number): Uint8Array[] {
  const rest: Uint8Array[] = [];
  for (const chunk of chunks) {
    if (skip >= chunk.byteLength) {
      skip -= chunk.byteLength;
      continue;
    }
    rest.push(skip > 0 ? chunk.subarray(skip) : chunk);
    skip = 0;
  }
  return rest;
}

export interface StreamScan {
  /** Bytes from the start that hold only whole messages (including end-of-stream when present). */
  readonly validLength: number;
  /** Whether the stream ended with the end-of-stream marker. */
  readonly ended: boolean;
  /** Whether a schema message opens the stream. */
  readonly hasSchema: boolean;
  /** Number of whole record batch messages. */
  readonly batchCount: number;
  /** Bytes after the valid prefix: a torn tail, or garbage after end-of-stream. */
  readonly trailingBytes: number;
  /**
   * Set when the valid prefix ends at a message whose bytes are all there but whose
   * metadata is damaged: rot or an overwrite, never a torn write (which leaves a message short).
   */
  readonly damage?: StreamDamage;
}

/** A whole message that cannot be decoded: where it starts, and why. */
export interface StreamDamage {
  readonly offset: number;
  readonly reason: string;
}

/** One whole message of a stream: where it starts and ends, and what it holds. */
interface FramedMessage {
  readonly offset: number;
  /** The 8-byte prefix plus the (padded) flatbuffer metadata. */
  readonly metadataBytes: number;
  readonly bodyLength: number;
  readonly end: number;
  readonly message: Message;
  readonly headerType: MessageHeader;
}

/**
 * The whole messages from the start of `bytes`, then 'end-of-stream' if the marker
 * follows them; stops silently at the first message that is not whole, and with a
 * `StreamDamage` at the first whole message whose metadata cannot be decoded.
 */
function* framedMessages(bytes: Uint8Array): Generator<FramedMessage | 'end-of-stream' | StreamDamage> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pos = 0;
  while (pos + 8 <= bytes.byteLength) {
    if (view.getInt32(pos, true) !== -1) return;
    const metadataLength = view.getInt32(pos + 4, true);
    if (metadataLength === 0) {
      yield 'end-of-stream';
      return;
    }
    if (metadataLength < 0 || pos + 8 + metadataLength > bytes.byteLength) return;
    const metadataEnd = pos + 8 + metadataLength;
    const metadata = bytes.subarray(pos + 8, metadataEnd);
    // Checked before apache-arrow reads it: its decoder trusts every length it finds.
    let problem = metadataProblem(metadata);
    let message: Message | undefined;
    if (problem === undefined) {
      try {
        message = Message.decode(metadata);
      } catch (error) {
        problem = `message metadata: ${errorMessage(error)}`;
      }
    }
    if (message === undefined) {
      // Zeros from inside the metadata to the end of the file: blocks a crash left
      // unwritten (some filesystems show them as zeros), a torn tail like a short one.
      if (!endsInZerosFrom(bytes, metadataEnd)) yield { offset: pos, reason: problem ?? 'no message' };
      return;
    }
    const bodyLength = Number(message.bodyLength);
    const end = pos + 8 + metadataLength + bodyLength;
    if (end > bytes.byteLength) return;
    const headerType = message.headerType as MessageHeader;
    yield { offset: pos, metadataBytes: 8 + metadataLength, bodyLength, end, message, headerType };
    pos = end;
  }
}

/** Whether every byte of `bytes` from some position before `end` on is zero. */
function endsInZerosFrom(bytes: Uint8Array, end: number): boolean {
  let last = bytes.byteLength - 1;
  while (last >= 0 && bytes[last] === 0) last -= 1;
  return last < end - 1;
}

/**
 * Walks the message framing without decoding bodies. It never throws on a torn
 * tail: that is the normal state of an open part after a crash.
 */
export function scanStream(bytes: Uint8Array): StreamScan {
  let pos = 0;
  let hasSchema = false;
  let batchCount = 0;
  let ended = false;
  let damage: StreamDamage | undefined;
  for (const m of framedMessages(bytes)) {
    if (m === 'end-of-stream') {
      ended = true;
      pos += 8;
      break;
    }
    if (!('message' in m)) {
      damage = m;
      break;
    }
    if (m.headerType === MessageHeader.Schema) {
      if (m.offset !== 0) break;
      hasSchema = true;
    } else if (!hasSchema) {
      break;
    } else if (m.headerType === MessageHeader.RecordBatch) {
      batchCount += 1;
    }
    pos = m.end;
  }
  return {
    validLength: pos,
    ended,
    hasSchema,
    batchCount,
    trailingBytes: bytes.byteLength - pos,
    ...(damage ? { damage } : {}),
  };
}

/** Where one record batch message lies in a stream, as an IPC file's footer names it. */
export interface RecordBatchBlock {
  readonly offset: number;
  readonly metaDataLength: number;
  readonly bodyLength: number;
  /** Rows, as the message's header says. */
  readonly rows: number;
}

/**
 * The record batch messages of a whole stream (a schema message, batches, end-of-stream),
 * or undefined if it holds anything else (a dictionary batch: an IPC file cannot hold
 * several parts' dictionaries under one id) or is not whole.
 */
export function recordBatchBlocks(bytes: Uint8Array): RecordBatchBlock[] | undefined {
  const blocks: RecordBatchBlock[] = [];
  let first = true;
  for (const m of framedMessages(bytes)) {
    if (m === 'end-of-stream') return first ? undefined : blocks;
    if (!('message' in m)) return undefined;
    if (first) {
      if (m.headerType !== MessageHeader.Schema) return undefined;
      first = false;
      continue;
    }
    if (m.headerType !== MessageHeader.RecordBatch) return undefined;
    const header = m.message.header() as { length: number | bigint } | null;
    if (!header) return undefined;
    blocks.push({
      offset: m.offset,
      metaDataLength: m.metadataBytes,
      bodyLength: m.bodyLength,
      rows: Number(header.length),
    });
  }
  return undefined;
}

/** Decodes the batches of a stream known to hold whole messages only. */
export function decodeBatches(bytes: Uint8Array): { schema: Schema; batches: RecordBatch[] } {
  // The reader forgets its schema once it has read to the end: take it first.
  const reader = RecordBatchReader.from(bytes).open();
  const schema = reader.schema;
  const batches = reader.readAll();
  for (const [i, batch] of batches.entries()) {
    const problem = batchBoundsProblem(batch);
    if (problem) throw new Error(`record batch ${i}: ${problem}`);
  }
  return { schema, batches };
}
