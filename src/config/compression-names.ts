/** The codecs a producer can name in a record batch's attributes (and `--compression`). */
export const COMPRESSION_NAMES = ['none', 'gzip', 'snappy', 'lz4', 'zstd'] as const;
export type CompressionName = (typeof COMPRESSION_NAMES)[number];
