import { compressFrameSync, decompressFrameSync } from 'lz4-napi';
import { settled, type BatchCodec } from './codec';

/**
 * Kafka's lz4 (message format v2) is the LZ4 frame format, not raw blocks: the Java
 * producer writes 64 KiB independent blocks, librdkafka the library's defaults; other
 * writers use blocks up to 4 MiB, linked blocks and content checksums, which the frame
 * decoder (lz4_flex) reads and verifies. The broken header checksum of Kafka 0.8-0.9's
 * message format v0 is not read.
 */
export const lz4Codec: BatchCodec = {
  compress: (plain) => settled(() => compressFrameSync(plain)),
  decompress: (compressed) => settled(() => decompressFrameSync(compressed)),
};
