/** What one compression codec does to a record batch's records section. */
export interface BatchCodec {
  compress(plain: Buffer): Promise<Buffer>;
  /** Refuses (DecompressedSizeOverCapError) a batch whose records would exceed `maxBytes` decompressed. */
  decompress(compressed: Buffer, maxBytes?: number): Promise<Buffer>;
}

/**
 * The most one record batch may hold decompressed. A batch is decompressed whole, on the
 * main thread, before any of its records is seen: a batch of zeros compresses 32,000×
 * with zstd (1,000× gzip, 255× lz4), so a broker-accepted 1 MiB batch would allocate
 * gigabytes and kill every replica that fetches it, on every start. 64 MiB is 4× the
 * fetch queue's budget (`queue.maxBytes` 16 MiB), which is also a partition's fetch,
 * far above any batch a producer writes (the Java producer closes a batch near
 * `batch.size`, 16 KiB to 1 MiB, of estimated compressed bytes; a broker's
 * `message.max.bytes` is 1 MiB by default), and within what the process can survive
 * once. Above it the batch is refused as a corrupt one: its partition stops there.
 */
export const MAX_DECOMPRESSED_BATCH_BYTES = 64 * 1024 * 1024;

/** A batch whose records decompress to more than the cap (MAX_DECOMPRESSED_BATCH_BYTES). */
export class DecompressedSizeOverCapError extends Error {
  constructor(
    readonly maxBytes: number,
    /** What the batch says it decompresses to, when it says so before decompressing. */
    readonly claimedBytes?: number,
  ) {
    super(
      `its records decompress to ${claimedBytes === undefined ? 'more than' : `${claimedBytes} bytes, over`} the cap of ${maxBytes} bytes a batch`,
    );
    this.name = 'DecompressedSizeOverCapError';
  }
}

/** zlib's refusal of an output over `maxOutputLength`, as the cap's error. */
export function zlibCapped<T>(maxBytes: number, call: () => T): T {
  try {
    return call();
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE')
      throw new DecompressedSizeOverCapError(maxBytes);
    throw error;
  }
}

// A configuration's vocabulary (the dead-letter topic's compression) as much as the codecs'.
export { COMPRESSION_NAMES, type CompressionName } from '../../../config/compression-names';

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
