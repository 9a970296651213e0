import { gzipSync, unzipSync } from 'node:zlib';
import { settled, type BatchCodec } from './codec';

/** As kafkajs's own gzip codec (but synchronous); registered again so that its batches are checked like the others'. */
export const gzipCodec: BatchCodec = {
  compress: (plain) => settled(() => gzipSync(plain)),
  decompress: (compressed) => settled(() => unzipSync(compressed)),
};
