export {
  COMPRESSION_NAMES,
  DecompressedSizeOverCapError,
  MAX_DECOMPRESSED_BATCH_BYTES,
  type BatchCodec,
  type CompressionName,
} from './codec';
export { CORRUPT_BATCH_MESSAGE, CorruptCompressedBatchError } from './corrupt-batch';
export { compressionType, kafkajsCodec, registerCompressionCodecs } from './register';
export { fetchExpansion, FetchExpansion } from './expansion';
export { misframedBatches, MisframedBatches, type MisframedBatch } from './misframed-batches';
