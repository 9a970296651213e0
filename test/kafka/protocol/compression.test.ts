import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { crc32c } from '@node-rs/crc32';
import { CompressionTypes } from 'kafkajs';
import {
  CorruptCompressedBatchError,
  DecompressedSizeOverCapError,
  FetchExpansion,
  kafkajsCodec,
  MAX_DECOMPRESSED_BATCH_BYTES,
} from '../../../src/kafka/protocol/compression';
import type { BatchCodec, CompressionName } from '../../../src/kafka/protocol/compression';
import { gzipCodec } from '../../../src/kafka/protocol/compression/gzip';
import { lz4Codec, lz4DecompressedBound } from '../../../src/kafka/protocol/compression/lz4';
import { snappyCodec, SnappyFramingError } from '../../../src/kafka/protocol/compression/snappy';
import { zstdCodec } from '../../../src/kafka/protocol/compression/zstd';

// Made by the reference encoders (compression-fixtures/make-fixtures.sh): kafka-clients
// 3.9.1's Lz4BlockOutputStream, snappy-java and zstd-jni as the Java producer calls them,
// and the lz4 and zstd command-line tools for the framings the Java producer never writes.
const FIXTURES = path.join(__dirname, 'compression-fixtures');
const fixture = (name: string) => readFileSync(path.join(FIXTURES, name));
const plain = fixture('plain.log');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- kafkajs 2.2.4's record encoder, as its producer writes
const encodeRecord = require('kafkajs/src/protocol/recordBatch/record/v0') as (record: {
  offsetDelta: number;
  key: Buffer | null;
  value: Buffer;
}) => { buffer: Buffer };

describe('each codec reads what the reference encoders write', () => {
  it.each([
    ['snappy', 'a raw block (librdkafka, kafkajs)', 'snappy-raw.bin', snappyCodec],
    ['snappy', "xerial framing in several chunks (the Java producer's)", 'snappy-xerial.bin', snappyCodec],
    ['lz4', "Kafka's own LZ4 frame writer (64 KiB blocks, no checksums)", 'lz4-java.bin', lz4Codec],
    ['lz4', 'a frame of 4 MiB blocks with a content checksum', 'lz4-4mib-content-checksum.bin', lz4Codec],
    ['lz4', 'a frame of 64 KiB blocks without a content checksum', 'lz4-64kib-no-checksum.bin', lz4Codec],
    ['lz4', 'a frame of linked blocks with a content size', 'lz4-4mib-linked-content-size.bin', lz4Codec],
    ['zstd', "zstd-jni's stream (the Java producer's: no content size)", 'zstd-java.bin', zstdCodec],
    ['zstd', 'a frame without a content size', 'zstd-no-content-size.bin', zstdCodec],
    ['zstd', 'two frames back to back in one batch', 'zstd-two-frames.bin', zstdCodec],
  ] as [string, string, string, BatchCodec][])('%s: %s (%s)', async (_name, _what, file, codec) => {
    const out = await codec.decompress(fixture(file));
    expect(out.length).toBe(plain.length);
    expect(out.equals(plain)).toBe(true);
  });

  it("snappy: Redpanda's xerial header (version fields little-endian) is read by its magic alone", async () => {
    const redpanda = Buffer.from(fixture('snappy-xerial.bin'));
    redpanda.writeInt32LE(1, 8);
    redpanda.writeInt32LE(1, 12);
    expect((await snappyCodec.decompress(redpanda)).equals(plain)).toBe(true);
  });

  it('snappy: a xerial chunk whose length runs past the stream is refused, not cut short', async () => {
    const framed = fixture('snappy-xerial.bin');
    await expect(snappyCodec.decompress(framed.subarray(0, framed.length - 10))).rejects.toThrow(
      SnappyFramingError,
    );
  });

  it('lz4: a frame whose content checksum does not match its blocks is refused', async () => {
    const damaged = Buffer.from(fixture('lz4-4mib-content-checksum.bin'));
    damaged[damaged.length - 2]! ^= 0xff; // inside the trailing content checksum
    await expect(lz4Codec.decompress(damaged)).rejects.toThrow();
  });

  it.each([
    ['gzip', gzipCodec],
    ['snappy', snappyCodec],
    ['lz4', lz4Codec],
    ['zstd', zstdCodec],
  ] as [string, BatchCodec][])('%s: what it writes it reads back', async (_name, codec) => {
    const packed = await codec.compress(plain);
    expect(packed.length).toBeLessThan(plain.length);
    expect((await codec.decompress(packed)).equals(plain)).toBe(true);
  });
});

/**
 * A record batch (message format v2) of `count` records from `first`, its records
 * section `records`, with the CRC a producer computes: the records section returned is
 * a slice of it, as kafkajs hands a codec the records of a fetched batch.
 */
function recordBatch(first: number, count: number, codecId: number, records: Buffer): Buffer {
  const header = Buffer.alloc(61);
  header.writeBigInt64BE(BigInt(first), 0);
  header.writeInt32BE(49 + records.length, 8);
  header.writeInt8(2, 16); // magic
  header.writeInt16BE(codecId, 21);
  header.writeInt32BE(count - 1, 23);
  header.writeInt32BE(count, 57);
  const batch = Buffer.concat([header, records]);
  batch.writeUInt32BE(crc32c(batch.subarray(21)), 17);
  return batch.subarray(61);
}

describe('a corrupt compressed batch is named, never read as other records', () => {
  it('a batch whose CRC does not match (a flipped byte that zstd would decode without an error) names its offsets', async () => {
    const records = recordBatch(1_000, 50, CompressionTypes.ZSTD, await zstdCodec.compress(plain));
    records[100]! ^= 0xff;
    const codec = kafkajsCodec('zstd', zstdCodec);
    const error = await codec.decompress(records).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CorruptCompressedBatchError);
    expect((error as CorruptCompressedBatchError).offsets).toEqual({ first: 1_000, last: 1_049 });
    expect((error as Error).message).toMatch(/^corrupt compressed record batch \(zstd, offsets 1000-1049\)/);
  });

  it('bytes the codec cannot read (CRC intact) name the codec, the offsets and its reason', async () => {
    const records = recordBatch(7, 3, CompressionTypes.Snappy, Buffer.from('not snappy at all, not at all'));
    const error = await kafkajsCodec('snappy', snappyCodec)
      .decompress(records)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CorruptCompressedBatchError);
    expect((error as CorruptCompressedBatchError).offsets).toEqual({ first: 7, last: 9 });
    expect((error as Error).message).toContain('the snappy codec cannot read it');
  });

  it('a healthy batch decompresses through the check', async () => {
    const count = 200;
    const lines = plain.toString('latin1').split('\n').slice(0, count);
    const records = Buffer.concat(
      lines.map(
        (line, i) => encodeRecord({ offsetDelta: i, key: null, value: Buffer.from(line, 'latin1') }).buffer,
      ),
    );
    const batch = recordBatch(0, count, CompressionTypes.LZ4, await lz4Codec.compress(records));
    expect((await kafkajsCodec('lz4', lz4Codec).decompress(batch)).equals(records)).toBe(true);
  });

  it('a records section not inside a v2 batch (a legacy message set) is decompressed without the check', async () => {
    const alone = await gzipCodec.compress(plain);
    expect((await kafkajsCodec('gzip', gzipCodec).decompress(alone)).equals(plain)).toBe(true);
  });
});

describe('a decompression bomb is refused before it is allocated (the replica is not OOM-killed)', () => {
  // Zeros just over the cap: each codec's real output, 255× (lz4) to 32,000× (zstd) smaller.
  const zeros = Buffer.alloc(MAX_DECOMPRESSED_BATCH_BYTES + 1024 * 1024);

  it.each([
    ['gzip', CompressionTypes.GZIP, gzipCodec],
    ['snappy', CompressionTypes.Snappy, snappyCodec],
    ['lz4', CompressionTypes.LZ4, lz4Codec],
    ['zstd', CompressionTypes.ZSTD, zstdCodec],
  ] as [Exclude<CompressionName, 'none'>, number, BatchCodec][])(
    '%s: a batch of zeros over the cap stops as a corrupt batch naming its offsets',
    async (name, type, codec) => {
      const records = recordBatch(500, 10, type, await codec.compress(zeros));
      const error = await kafkajsCodec(name, codec)
        .decompress(records)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CorruptCompressedBatchError);
      expect((error as CorruptCompressedBatchError).offsets).toEqual({ first: 500, last: 509 });
      expect((error as Error).message).toContain(`the cap of ${MAX_DECOMPRESSED_BATCH_BYTES} bytes`);
      expect((error as CorruptCompressedBatchError).cause).toBeInstanceOf(DecompressedSizeOverCapError);
    },
  );

  it('snappy: a block whose length preamble claims 4 GiB is refused by its preamble alone', async () => {
    const claims4GiB = Buffer.from([0x80, 0x80, 0x80, 0x80, 0x10, 0x00]);
    await expect(snappyCodec.decompress(claims4GiB)).rejects.toThrow(DecompressedSizeOverCapError);
  });

  it('snappy: xerial chunks each under the cap but over it together are refused before any is read', async () => {
    const chunk = await snappyCodec.compress(Buffer.alloc(1024 * 1024));
    const header = Buffer.from(fixture('snappy-xerial.bin').subarray(0, 16));
    const length = Buffer.alloc(4);
    length.writeInt32BE(chunk.length);
    const framed = Buffer.concat([header, length, chunk, length, chunk]);
    await expect(snappyCodec.decompress(framed, 1024 * 1024)).rejects.toThrow(DecompressedSizeOverCapError);
    expect((await snappyCodec.decompress(framed, 2 * 1024 * 1024)).length).toBe(2 * 1024 * 1024);
  });

  it.each([
    'lz4-java.bin',
    'lz4-4mib-content-checksum.bin',
    'lz4-64kib-no-checksum.bin',
    'lz4-4mib-linked-content-size.bin',
  ])('lz4: the bound read from the frame (%s) is at least what it decompresses to', (file) => {
    expect(lz4DecompressedBound(fixture(file))).toBeGreaterThanOrEqual(plain.length);
  });
});

describe('fetch sizes follow how much fetched batches decompress to (the memory budget holds)', () => {
  const MiB = 1024 * 1024;

  it('the first fetch, before anything is known, asks for a quarter; uncompressed, the sizes then stay as they are', () => {
    const e = new FetchExpansion();
    expect(e.scaled(4 * MiB, 64 * 1024)).toBe(MiB);
    e.observe(1_000, 1_000);
    e.answered(true);
    expect(e.scaled(4 * MiB, 64 * 1024)).toBe(4 * MiB);
  });

  it('a fetch that brought no records (an empty topic at start) keeps the first-fetch guard for the backlog produced later', () => {
    const e = new FetchExpansion();
    e.answered(false);
    e.answered(false);
    expect(e.scaled(16 * MiB, 64 * 1024)).toBe(4 * MiB);
    e.observe(MiB, 10 * MiB);
    e.answered(true);
    expect(e.scaled(16 * MiB, 64 * 1024)).toBe(Math.floor((16 * MiB) / 10));
  });

  it('a topic that compresses 12x: a twelfth at once, never below the floor, never above the size', () => {
    const e = new FetchExpansion();
    e.observe(MiB, 12 * MiB);
    e.answered(true);
    expect(e.scaled(12 * MiB, 64 * 1024)).toBe(MiB);
    expect(e.scaled(128 * 1024, 64 * 1024)).toBe(64 * 1024);
    expect(e.scaled(32 * 1024, 64 * 1024)).toBe(32 * 1024);
  });

  it('after compressible batches, a few poorly compressed ones bring the sizes back only slowly', () => {
    const e = new FetchExpansion();
    e.answered(true);
    e.observe(MiB, 12 * MiB);
    for (let i = 0; i < 5; i++) e.observe(MiB, MiB);
    expect(e.ratio).toBeGreaterThan(8);
    for (let i = 0; i < 200; i++) e.observe(MiB, MiB);
    expect(e.ratio).toBeLessThan(1.01);
  });
});
