import { compressSync, uncompressSync } from 'snappy';
import { settled, type BatchCodec } from './codec';

/**
 * The xerial framing (snappy-java's SnappyOutputStream), which the Java producer
 * writes: this magic, a version and a compatible-version int32 (Redpanda writes those
 * two little-endian, so only the magic is checked), then chunks, each an int32
 * big-endian length and a raw snappy block.
 */
const XERIAL_MAGIC = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00]);
const XERIAL_HEADER_BYTES = 16;

/** A snappy stream that does not parse (the batch's bytes are damaged). */
export class SnappyFramingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SnappyFramingError';
  }
}

export function isXerialFramed(data: Buffer): boolean {
  return data.length >= XERIAL_HEADER_BYTES && data.subarray(0, XERIAL_MAGIC.length).equals(XERIAL_MAGIC);
}

function uncompressBlock(block: Buffer): Buffer {
  return uncompressSync(block, { asBuffer: true }) as Buffer;
}

/** The chunks of a xerial-framed stream, uncompressed and joined. */
export function uncompressXerial(data: Buffer): Buffer {
  const chunks: Buffer[] = [];
  let at = XERIAL_HEADER_BYTES;
  while (at < data.length) {
    if (at + 4 > data.length) throw new SnappyFramingError(`xerial chunk header cut short at byte ${at}`);
    const length = data.readInt32BE(at);
    at += 4;
    if (length < 0 || at + length > data.length)
      throw new SnappyFramingError(
        `xerial chunk of ${length} bytes at byte ${at} runs past the stream's end`,
      );
    chunks.push(uncompressBlock(data.subarray(at, at + length)));
    at += length;
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}

/** Writes raw blocks (as librdkafka and kafkajs do; every Kafka client reads them); reads both framings. */
export const snappyCodec: BatchCodec = {
  compress: (plain) => settled(() => compressSync(plain)),
  decompress: (compressed) =>
    settled(() => (isXerialFramed(compressed) ? uncompressXerial(compressed) : uncompressBlock(compressed))),
};
