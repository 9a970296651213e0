import { Message, MessageHeader, RecordBatchReader, RecordBatchStreamWriter } from 'apache-arrow';
import type { RecordBatch, Schema } from 'apache-arrow';
import { batchBoundsProblem } from './batch-bounds';

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
}

/**
 * Walks the message framing without decoding bodies. It never throws on a torn
 * tail: that is the normal state of an open part after a crash.
 */
export function scanStream(bytes: Uint8Array): StreamScan {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pos = 0;
  let hasSchema = false;
  let batchCount = 0;
  let ended = false;
  while (pos + 8 <= bytes.byteLength) {
    if (view.getInt32(pos, true) !== -1) break;
    const metadataLength = view.getInt32(pos + 4, true);
    if (metadataLength === 0) {
      ended = true;
      pos += 8;
      break;
    }
    if (metadataLength < 0 || pos + 8 + metadataLength > bytes.byteLength) break;
    let message: Message;
    try {
      message = Message.decode(bytes.subarray(pos + 8, pos + 8 + metadataLength));
    } catch {
      break;
    }
    const end = pos + 8 + metadataLength + Number(message.bodyLength);
    if (end > bytes.byteLength) break;
    if (message.headerType === MessageHeader.Schema) {
      if (pos !== 0) break;
      hasSchema = true;
    } else if (!hasSchema) {
      break;
    } else if (message.headerType === MessageHeader.RecordBatch) {
      batchCount += 1;
    }
    pos = end;
  }
  return { validLength: pos, ended, hasSchema, batchCount, trailingBytes: bytes.byteLength - pos };
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
