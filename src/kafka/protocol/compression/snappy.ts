import { compressSync, uncompressSync } from 'snappy';
import {
  DecompressedSizeOverCapError,
  MAX_DECOMPRESSED_BATCH_BYTES,
  settled,
  type BatchCodec,
} from './codec';

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

/**
 * The length a raw snappy block says it decompresses to: its preamble, a little-endian
 * base-128 varint (the decoder allocates that much first).
 */
export function snappyClaimedLength(block: Buffer): number {
  let length = 0;
  for (let i = 0; i < 5 && i < block.length; i++) {
    const byte = block[i]!;
    length += (byte & 0x7f) * 2 ** (7 * i);
    if ((byte & 0x80) === 0) return length;
  }
  throw new SnappyFramingError('a snappy block without a length preamble');
}

function uncompressBlock(block: Buffer): Buffer {
  return uncompressSync(block, { asBuffer: true }) as Buffer;
}

function uncompressRaw(block: Buffer, maxBytes: number): Buffer {
  const claimed = snappyClaimedLength(block);
  if (claimed > maxBytes) throw new DecompressedSizeOverCapError(maxBytes, claimed);
  return uncompressBlock(block);
}

/** The chunks of a xerial-framed stream, uncompressed and joined; refused whole if their lengths sum over the cap. */
export function uncompressXerial(data: Buffer, maxBytes = MAX_DECOMPRESSED_BATCH_BYTES): Buffer {
  const blocks: Buffer[] = [];
  let claimed = 0;
  let at = XERIAL_HEADER_BYTES;
  while (at < data.length) {
    if (at + 4 > data.length) throw new SnappyFramingError(`xerial chunk header cut short at byte ${at}`);
    const length = data.readInt32BE(at);
    at += 4;
    if (length < 0 || at + length > data.length)
      throw new SnappyFramingError(
        `xerial chunk of ${length} bytes at byte ${at} runs past the stream's end`,
      );
    const block = data.subarray(at, at + length);
    claimed += snappyClaimedLength(block);
    blocks.push(block);
    at += length;
  }
  if (claimed > maxBytes) throw new DecompressedSizeOverCapError(maxBytes, claimed);
  const chunks = blocks.map(uncompressBlock);
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}

/** Writes raw blocks (as librdkafka and kafkajs do; every Kafka client reads them); reads both framings. */
export const snappyCodec: BatchCodec = {
  compress: (plain) => settled(() => compressSync(plain)),
  decompress: (compressed, maxBytes = MAX_DECOMPRESSED_BATCH_BYTES) =>
    settled(() =>
      isXerialFramed(compressed)
        ? uncompressXerial(compressed, maxBytes)
        : uncompressRaw(compressed, maxBytes),
    ),
};
