/**
 * Codec throughput: each compression codec a replica registers with kafkajs
 * (src/kafka/protocol/compression) on ~1 MiB record batches of the bench's ~800-byte JSON log
 * records, in this one thread: the compressed size, and MiB/s of uncompressed bytes to
 * decompress (what a replica does to every fetched batch) and to compress, through the
 * codecs kafkajs calls (the libraries' sync calls), and through the libraries' async
 * calls beside them (the thread pool: more CPU per MiB, the reason the codecs are sync).
 * Rates are per CPU second of this process (a shared machine moves them less than wall
 * time); the median of the rounds is the figure.
 *
 *   npm run build && node dist/bench/codec-throughput.js [--rounds 5] [--batches 40]
 */
import { promisify } from 'node:util';
import { unzip, zstdDecompress } from 'node:zlib';
import { decompressFrame } from 'lz4-napi';
import { uncompress } from 'snappy';
import type { BatchCodec } from '../src/kafka/protocol/compression';
import { gzipCodec } from '../src/kafka/protocol/compression/gzip';
import { lz4Codec } from '../src/kafka/protocol/compression/lz4';
import { snappyCodec } from '../src/kafka/protocol/compression/snappy';
import { zstdCodec } from '../src/kafka/protocol/compression/zstd';
import { benchArgs } from './args';
import { benchRecord } from './lib/records';

const args = benchArgs();
const ROUNDS = Number(args.get('rounds') ?? 5);
const BATCHES = Number(args.get('batches') ?? 40);
const BATCH_BYTES = 1024 * 1024;

/** The libraries' async calls, measured beside the codecs (which call their sync ones). */
const asyncDecompress: Record<string, (compressed: Buffer) => Promise<unknown>> = {
  gzip: promisify(unzip),
  snappy: (b) => uncompress(b, { asBuffer: true }),
  lz4: (b) => decompressFrame(b),
  zstd: promisify(zstdDecompress),
};
const CODECS: readonly { name: string; codec: BatchCodec }[] = [
  { name: 'gzip', codec: gzipCodec },
  { name: 'snappy', codec: snappyCodec },
  { name: 'lz4', codec: lz4Codec },
  { name: 'zstd', codec: zstdCodec },
];

/** One ~1 MiB batch of log records, as a record batch's records would hold them (varied by `seed`). */
function batch(seed: number): Buffer {
  const lines: string[] = [];
  let bytes = 0;
  for (let n = seed * 10_000; bytes < BATCH_BYTES; n++) {
    const line = benchRecord(n, 1_733_400_000_000 + n * 13);
    lines.push(line);
    bytes += line.length + 1;
  }
  return Buffer.from(lines.join('\n'));
}

const cpuSeconds = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
};

async function rate(work: () => unknown, bytes: number): Promise<number> {
  const start = cpuSeconds();
  await work();
  return bytes / (1024 * 1024) / Math.max(cpuSeconds() - start, 1e-6);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const plains = Array.from({ length: BATCHES }, (_, i) => batch(i));
  const total = plains.reduce((n, b) => n + b.length, 0);
  const rows: Record<string, string | number>[] = [];
  for (const { name, codec } of CODECS) {
    const packed = await Promise.all(plains.map((b) => codec.compress(b)));
    const measured = {
      decompress: [] as number[],
      decompressAsync: [] as number[],
      compress: [] as number[],
    };
    const viaCodec = () =>
      rate(async () => {
        for (const p of packed) await codec.decompress(p);
      }, total);
    const viaAsync = () =>
      rate(async () => {
        for (const p of packed) await asyncDecompress[name]!(p);
      }, total);
    for (let round = 0; round < ROUNDS; round++) {
      // Alternating which goes first: the first pays for collecting the garbage before it.
      if (round % 2 === 0) {
        measured.decompress.push(await viaCodec());
        measured.decompressAsync.push(await viaAsync());
      } else {
        measured.decompressAsync.push(await viaAsync());
        measured.decompress.push(await viaCodec());
      }
      measured.compress.push(
        await rate(async () => {
          for (const p of plains) await codec.compress(p);
        }, total),
      );
    }
    rows.push({
      codec: name,
      ratio: Number((total / packed.reduce((n, p) => n + p.length, 0)).toFixed(2)),
      'decompress MiB/s': Math.round(median(measured.decompress)),
      "decompress MiB/s (the library's async call)": Math.round(median(measured.decompressAsync)),
      'compress MiB/s': Math.round(median(measured.compress)),
    });
  }
  console.table(rows);
  console.log(JSON.stringify({ batches: BATCHES, batchBytes: BATCH_BYTES, rounds: ROUNDS, rows }));
}

void main();
