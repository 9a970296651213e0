import { promisify } from 'node:util';
import { zstdCompress, zstdDecompress } from 'node:zlib';
import type { BatchCodec } from './codec';

const compress = promisify(zstdCompress);
const decompress = promisify(zstdDecompress);

/**
 * Node's own zstd (no dependency). Its decoder reads frames without a content size
 * (the Java producer's stream writes none) and several frames one after the other.
 */
export const zstdCodec: BatchCodec = {
  compress: (plain) => compress(plain),
  decompress: (compressed) => decompress(compressed),
};
