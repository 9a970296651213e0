/** What one compression codec does to a record batch's records section. */
export interface BatchCodec {
  compress(plain: Buffer): Promise<Buffer>;
  decompress(compressed: Buffer): Promise<Buffer>;
}

/** The codecs a producer can name in a record batch's attributes (and `--compression`). */
export const COMPRESSION_NAMES = ['none', 'gzip', 'snappy', 'lz4', 'zstd'] as const;
export type CompressionName = (typeof COMPRESSION_NAMES)[number];

/**
 * A synchronous library call as the promise kafkajs's codec interface wants, a throw
 * as a rejection. The codecs call the libraries synchronously: on ~1 MiB batches zlib's
 * async calls (zstd, gzip) cost 2-3× the CPU per MiB (the thread pool, 16 KiB chunks),
 * snappy's and lz4's no less than their sync calls (bench/codec-throughput.ts), and a
 * batch takes about a millisecond.
 */
export function settled<T>(call: () => T): Promise<T> {
  try {
    return Promise.resolve(call());
  } catch (error) {
    return Promise.reject(error instanceof Error ? error : new Error(String(error)));
  }
}
