import { gzipSync, unzipSync } from 'node:zlib';
import { MAX_DECOMPRESSED_BATCH_BYTES, settled, zlibCapped, type BatchCodec } from './codec';

/** As kafkajs's own gzip codec (but synchronous); registered again so that its batches are checked like the others'. */
export const gzipCodec: BatchCodec = {
  compress: (plain) => settled(() => gzipSync(plain)),
  // zlib stops at maxOutputLength before allocating more: a bomb costs the cap at most.
  decompress: (compressed, maxBytes = MAX_DECOMPRESSED_BATCH_BYTES) =>
    settled(() => zlibCapped(maxBytes, () => unzipSync(compressed, { maxOutputLength: maxBytes }))),
};
