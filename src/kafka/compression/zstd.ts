import { zstdCompressSync, zstdDecompressSync } from 'node:zlib';
import { settled, type BatchCodec } from './codec';

/**
 * Node's own zstd (no dependency). Its decoder reads frames without a content size
 * (the Java producer's stream writes none) and several frames one after the other.
 */
export const zstdCodec: BatchCodec = {
  compress: (plain) => settled(() => zstdCompressSync(plain)),
  decompress: (compressed) => settled(() => zstdDecompressSync(compressed)),
};
