export { COMPRESSION_NAMES, type BatchCodec, type CompressionName } from './codec';
export { CORRUPT_BATCH_MESSAGE, CorruptCompressedBatchError } from './corrupt-batch';
export { compressionType, kafkajsCodec, registerCompressionCodecs } from './register';
export { fetchExpansion, FetchExpansion } from './expansion';
