import { zstdCompressSync, zstdDecompressSync } from 'node:zlib';
import { MAX_DECOMPRESSED_BATCH_BYTES, settled, zlibCapped, type BatchCodec } from './codec';

/**
 * Node's own zstd (no dependency). Its decoder reads frames without a content size
 * (the Java producer's stream writes none) and several frames one after the other;
 * maxOutputLength bounds their sum (the cap) before it is allocated.
 */
export const zstdCodec: BatchCodec = {
  compress: (plain) => settled(() => zstdCompressSync(plain)),
  decompress: (compressed, maxBytes = MAX_DECOMPRESSED_BATCH_BYTES) =>
    settled(() => zlibCapped(maxBytes, () => zstdDecompressSync(compressed, { maxOutputLength: maxBytes }))),
};
