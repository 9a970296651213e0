import { compressFrameSync, decompressFrameSync } from 'lz4-napi';
import {
  DecompressedSizeOverCapError,
  MAX_DECOMPRESSED_BATCH_BYTES,
  settled,
  type BatchCodec,
} from './codec';

/** An LZ4 frame stream whose structure does not parse (the batch's bytes are damaged). */
export class Lz4FramingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'Lz4FramingError';
  }
}

const FRAME_MAGIC = 0x184d2204;
const SKIPPABLE_MAGIC = 0x184d2a50; // the low 4 bits vary
const BLOCK_MAX_BYTES: Record<number, number> = { 4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20 };
const UNCOMPRESSED_BLOCK = 0x80000000;

/**
 * The most an LZ4 frame stream can decompress to, read from its structure without
 * decompressing: every block decompresses to at most its frame's block maximum (or, stored
 * uncompressed, to its own size). lz4-napi's decoder has no output limit, and a content
 * size in the header is optional (Kafka's writer puts none), so the blocks are counted.
 */
export function lz4DecompressedBound(data: Buffer): number {
  let at = 0;
  let bound = 0;
  const need = (bytes: number, what: string) => {
    if (at + bytes > data.length) throw new Lz4FramingError(`${what} cut short at byte ${at}`);
  };
  while (at < data.length) {
    need(4, 'frame magic');
    const magic = data.readUInt32LE(at);
    if ((magic & 0xfffffff0) === SKIPPABLE_MAGIC) {
      need(8, 'skippable frame');
      at += 8 + data.readUInt32LE(at + 4);
      continue;
    }
    if (magic !== FRAME_MAGIC) throw new Lz4FramingError(`no LZ4 frame magic at byte ${at}`);
    need(7, 'frame descriptor');
    const flags = data[at + 4]!;
    const blockMax = BLOCK_MAX_BYTES[(data[at + 5]! >> 4) & 0x07];
    if (blockMax === undefined) throw new Lz4FramingError(`unknown LZ4 block size at byte ${at + 5}`);
    const blockChecksum = (flags & 0x10) !== 0;
    at += 6 + (flags & 0x08 ? 8 : 0) + (flags & 0x01 ? 4 : 0) + 1;
    for (;;) {
      need(4, 'block header');
      const word = data.readUInt32LE(at);
      at += 4;
      if (word === 0) break; // the end mark
      const size = (word & ~UNCOMPRESSED_BLOCK) >>> 0;
      bound += word & UNCOMPRESSED_BLOCK ? size : blockMax;
      at += size + (blockChecksum ? 4 : 0);
      need(0, 'block');
    }
    if (flags & 0x04) at += 4; // the content checksum
    need(0, 'content checksum');
  }
  return bound;
}

/**
 * Kafka's lz4 (message format v2) is the LZ4 frame format, not raw blocks: the Java
 * producer writes 64 KiB independent blocks, librdkafka the library's defaults; other
 * writers use blocks up to 4 MiB, linked blocks and content checksums, which the frame
 * decoder (lz4_flex) reads and verifies. The broken header checksum of Kafka 0.8-0.9's
 * message format v0 is not read. A stream whose blocks could exceed the cap is refused
 * before decoding (its bound overestimates by at most one block a frame).
 */
export const lz4Codec: BatchCodec = {
  compress: (plain) => settled(() => compressFrameSync(plain)),
  decompress: (compressed, maxBytes = MAX_DECOMPRESSED_BATCH_BYTES) =>
    settled(() => {
      if (lz4DecompressedBound(compressed) > maxBytes) throw new DecompressedSizeOverCapError(maxBytes);
      return decompressFrameSync(compressed);
    }),
};
