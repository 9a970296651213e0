import { promisify } from 'node:util';
import { gzip, unzip } from 'node:zlib';
import type { BatchCodec } from './codec';

const compress = promisify(gzip);
const decompress = promisify(unzip);

/** As kafkajs's own gzip codec; registered again so that its batches are checked like the others. */
export const gzipCodec: BatchCodec = {
  compress: (plain) => compress(plain),
  decompress: (compressed) => decompress(compressed),
};
