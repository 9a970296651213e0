import { CompressionCodecs, CompressionTypes } from 'kafkajs';
import { gunzipSync, gzipSync } from 'node:zlib';
import {
  CorruptCompressedBatchError,
  MisframedBatches,
  misframedBatches,
  registerCompressionCodecs,
} from '../../../src/kafka/protocol/compression';
import { frameRecords } from '../../../src/kafka/protocol/compression/record-framing';
import { SeededRandom } from '../../support/seeded-random';
import { zigzagVarint } from '../../support/varint';

/* eslint-disable @typescript-eslint/no-require-imports -- kafkajs 2.2.4, the producer and the reader under test */
const Decoder = require('kafkajs/src/protocol/decoder') as new (buffer: Buffer) => unknown;
const Encoder = require('kafkajs/src/protocol/encoder') as new () => {
  writeEncoderArray(records: unknown[]): { buffer: Buffer };
};
const Long = require('kafkajs/src/utils/long') as { fromValue(v: string): unknown };
const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0') as {
  RecordBatch(batch: {
    compression: number;
    firstOffset: unknown;
    lastOffsetDelta: number;
    records: unknown[];
  }): Promise<{ buffer: Buffer }>;
};
const encodeRecord = require('kafkajs/src/protocol/recordBatch/record/v0') as (record: {
  offsetDelta: number;
  key: Buffer | null;
  value: Buffer | Uint8Array | null;
  headers?: Record<string, string>;
}) => unknown;
const decodeBatch = require('kafkajs/src/protocol/recordBatch/v0/decoder') as (decoder: unknown) => Promise<{
  records: { offset: string; value: Buffer | null; key: Buffer | null }[];
}>;
/* eslint-enable @typescript-eslint/no-require-imports */

beforeAll(() => registerCompressionCodecs());

type Value = Buffer | Uint8Array | null;

/** Records as kafkajs 2.2.4's producer encodes them (their lengths from Buffer.byteLength). */
function encoded(values: readonly Value[], deltas = values.map((_, i) => i)): unknown[] {
  return values.map((value, i) => encodeRecord({ offsetDelta: deltas[i]!, key: null, value }));
}

/** The records section of a compressed batch, as it decompresses. */
function section(values: readonly Value[], deltas?: number[]): Buffer {
  return Buffer.from(new Encoder().writeEncoderArray(encoded(values, deltas)).buffer);
}

/** A whole record batch as kafkajs's producer sends it (the broker keeps such batches as sent). */
async function producedBatch(
  values: readonly Value[],
  compression = CompressionTypes.GZIP,
  firstOffset = '500',
): Promise<Buffer> {
  const batch = await RecordBatch({
    compression,
    firstOffset: Long.fromValue(firstOffset),
    lastOffsetDelta: values.length - 1,
    records: encoded(values),
  });
  return batch.buffer;
}

/** The batch as kafkajs's consumer reads it, through the registered codecs. */
async function consumed(batch: Buffer): Promise<{ offset: string; value: string | null }[]> {
  const { records } = await decodeBatch(new Decoder(batch));
  return records.map((r) => ({ offset: r.offset, value: r.value?.toString('latin1') ?? null }));
}

const json = (id: number) => JSON.stringify({ id, text: 'x'.repeat(id % 40) });
/** What kafkajs writes for a Uint8Array value: String(array), its length counted as the array's. */
const written = (id: number) => String(new TextEncoder().encode(json(id)));

describe("records whose lengths are not their sizes (kafkajs's producer given Uint8Array values) are read as the broker read them", () => {
  it('a producer whose lengths lie: kafkajs alone reads offsets outside the batch; framed by fields, exactly its records at their offsets', async () => {
    const values = Array.from({ length: 40 }, (_, i) => new TextEncoder().encode(json(i)));
    const framing = frameRecords(section(values), values.length, values.length - 1);
    expect(framing.kind).toBe('reframed');
    if (framing.kind !== 'reframed') return;
    expect(framing.misframed).toBe(values.length);

    const batch = await producedBatch(values);
    const read = await consumed(batch);
    expect(read).toEqual(values.map((_, i) => ({ offset: String(500 + i), value: written(i) })));
  });

  it("without the framing, kafkajs's own read loses records, stops a partition or fails the fetch (the hazards this prevents)", async () => {
    const codecs = CompressionCodecs as Record<number, () => unknown>;
    const framing = codecs[CompressionTypes.GZIP]!;
    codecs[CompressionTypes.GZIP] = () => ({
      compress: (encoder: { buffer: Buffer }) => Promise.resolve(gzipSync(encoder.buffer)),
      decompress: (compressed: Buffer) => Promise.resolve(gunzipSync(compressed)),
    });
    try {
      const uint8 = (n: number) => Array.from({ length: n }, (_, i) => new TextEncoder().encode(json(i)));
      const offsets = async (n: number) =>
        (await decodeBatch(new Decoder(await producedBatch(uint8(n))))).records.map((r) => Number(r.offset));
      // Two records at 500 and 501: the second is read at an offset past the batch, and the
      // position would move over the records after it.
      const [, second] = await offsets(2);
      expect(second).toBeGreaterThan(501);
      // Three: one read below the one before it (staging refuses offsets that go back).
      const three = await offsets(3);
      expect(three.some((o, i) => i > 0 && o <= three[i - 1]!)).toBe(true);
      // Ten: kafkajs throws, failing every partition of the fetch, again on every retry.
      await expect(offsets(10)).rejects.toThrow(/outside buffer bounds/);
    } finally {
      codecs[CompressionTypes.GZIP] = framing;
    }
  });

  it.each([
    ['gzip', CompressionTypes.GZIP],
    ['snappy', CompressionTypes.Snappy],
    ['lz4', CompressionTypes.LZ4],
    ['zstd', CompressionTypes.ZSTD],
  ])('%s: a batch mixing Buffer and Uint8Array values reads every record at its offset', async (_, type) => {
    const values = Array.from({ length: 30 }, (_, i) =>
      i % 3 === 1 ? new TextEncoder().encode(json(i)) : Buffer.from(json(i)),
    );
    const read = await consumed(await producedBatch(values, type));
    expect(read).toEqual(
      values.map((v, i) => ({ offset: String(500 + i), value: Buffer.isBuffer(v) ? json(i) : written(i) })),
    );
  });

  it('a batch whose first offset is past 2^53 is read (its last offset delta taken from its header, not from its offsets as doubles)', async () => {
    const values = [Buffer.from('a'), Buffer.from('b'), Buffer.from('c')];
    const read = await consumed(await producedBatch(values, CompressionTypes.GZIP, '9007199254740991'));
    expect(read.map((r) => r.value)).toEqual(['a', 'b', 'c']);
  });

  it('a well-framed batch goes on as its bytes, not copied', () => {
    const body = section([Buffer.from('a'), null, Buffer.from(json(3))]);
    expect(frameRecords(body, 3, 2)).toEqual({ kind: 'as-written' });
  });

  it('records a compaction removed (gaps in the offsets, the batch keeping its last offset) are as written', () => {
    const body = section([Buffer.from('a'), Buffer.from('b'), Buffer.from('c')], [0, 4, 9]);
    expect(frameRecords(body, 3, 9)).toEqual({ kind: 'as-written' });
    expect(frameRecords(body, 3, 8).kind).toBe('unreadable'); // past the batch's last offset
  });

  it('headers, keys and null values are walked as the broker walks them', () => {
    const records = [
      encodeRecord({ offsetDelta: 0, key: Buffer.from('k'), value: null, headers: { a: '1', b: '' } }),
      encodeRecord({
        offsetDelta: 1,
        key: null,
        value: Buffer.alloc(300, 7),
        headers: { c: 'x'.repeat(200) },
      }),
    ];
    const body = Buffer.from(new Encoder().writeEncoderArray(records).buffer);
    expect(frameRecords(body, 2, 1)).toEqual({ kind: 'as-written' });
  });

  it.each<[string, (body: Buffer) => [Buffer, number, number]]>([
    ['fewer records than the header counts', (b) => [b, 4, 3]],
    ['more bytes than the records', (b) => [Buffer.concat([b, Buffer.from([0])]), 3, 2]],
    ['a record cut short', (b) => [b.subarray(0, b.length - 2), 3, 2]],
    ['offsets that go back', (b) => [b, 3, 2]],
  ])('bytes that read as no batch the header describes are unreadable: %s', (what, make) => {
    const deltas = what === 'offsets that go back' ? [0, 2, 1] : [0, 1, 2];
    const body = section([Buffer.from('a'), Buffer.from('bb'), Buffer.from('ccc')], deltas);
    const [bytes, count, last] = make(body);
    expect(frameRecords(bytes, count, last).kind).toBe('unreadable');
  });

  it('header counts of 2^30 are unreadable at once, never walked; lengths below -1 take no bytes, as the broker reads them', () => {
    // attributes, timestamp delta 0, offset delta 0, then the key, value and headers given
    const record = (...fields: number[][]) => {
      const body = Buffer.from([0, 0, 0, ...fields.flat()]);
      return Buffer.concat([Buffer.from(zigzagVarint(body.length)), body]);
    };
    const hugeHeaders = record(zigzagVarint(-1), zigzagVarint(-1), zigzagVarint(2 ** 30));
    const negative = record(zigzagVarint(-7), zigzagVarint(-1), zigzagVarint(0));
    // The walk stops at the first header, whose key would lie past the bytes (a spin through
    // 2^30 headers would hold the test past its timeout).
    expect(frameRecords(hugeHeaders, 1, 0)).toEqual({
      kind: 'unreadable',
      detail: "a varint runs past the records' 11 bytes",
    });
    expect(frameRecords(negative, 1, 0)).toEqual({ kind: 'as-written' });
    const negativeHeaderKey = record(
      zigzagVarint(-1),
      zigzagVarint(-1),
      zigzagVarint(1),
      zigzagVarint(-3),
      zigzagVarint(-1),
    );
    expect(frameRecords(negativeHeaderKey, 1, 0)).toEqual({
      kind: 'unreadable',
      detail: 'a header key length of -3',
    });
  });

  it('damaged bytes never give kafkajs an offset outside the batch or out of order (seeded fuzz)', () => {
    const random = new SeededRandom(20261207);
    const values = Array.from({ length: 12 }, (_, i) =>
      i % 2 ? new TextEncoder().encode(json(i)) : Buffer.from(json(i)),
    );
    let read = 0;
    for (let round = 0; round < 400; round++) {
      const body = Buffer.from(section(values));
      for (let flips = 1 + Math.floor(random.next() * 3); flips > 0; flips--)
        body[Math.floor(random.next() * body.length)] = Math.floor(random.next() * 256);
      const framing = frameRecords(body, values.length, values.length - 1);
      if (framing.kind === 'unreadable') continue;
      read += 1;
      const bytes = framing.kind === 'reframed' ? framing.records : body;
      const cut = new Decoder(bytes) as { readVarIntBytes(): Buffer };
      let previous = -1;
      for (let i = 0; i < values.length; i++) {
        const one = new Decoder(cut.readVarIntBytes()) as {
          readInt8(): number;
          readVarLong(): unknown;
          readVarInt(): number;
        };
        one.readInt8();
        one.readVarLong();
        const delta = one.readVarInt();
        expect(delta).toBeGreaterThan(previous);
        expect(delta).toBeLessThanOrEqual(values.length - 1);
        previous = delta;
      }
    }
    expect(read).toBeGreaterThan(0); // some damage (in values) leaves a readable batch
  });
});

describe('a reframed batch is named with its partition', () => {
  it("the codec notes the batch; the fetch finds it among its partition's records by their buffer", async () => {
    const values = [new TextEncoder().encode(json(1)), Buffer.from(json(2))];
    const batch = await producedBatch(values);
    const { records } = await decodeBatch(new Decoder(batch));
    const other = await decodeBatch(new Decoder(await producedBatch([Buffer.from('x')])));
    expect(misframedBatches.take(other.records)).toEqual([]);
    expect(misframedBatches.take(records)).toEqual([
      { codec: 'gzip', firstOffset: 500, lastOffset: 501, misframed: 1 },
    ]);
    expect(misframedBatches.take(records)).toEqual([]); // taken once
  });

  it('each record batch of a fetch is looked up once, by its first record with a key or a value', () => {
    const notices = new MisframedBatches();
    const [one, two] = [Buffer.allocUnsafeSlow(8), Buffer.allocUnsafeSlow(8)];
    notices.noted(one, { codec: 'lz4', firstOffset: 0, lastOffset: 2, misframed: 1 });
    notices.noted(two, { codec: 'lz4', firstOffset: 3, lastOffset: 4, misframed: 2 });
    const [first, second] = [{}, {}];
    const records = [
      { key: null, value: null, batchContext: first },
      { key: one.subarray(0, 2), value: null, batchContext: first },
      { key: null, value: one.subarray(2, 4), batchContext: first },
      { key: null, value: two.subarray(0, 1), batchContext: second },
    ];
    expect(notices.take(records)).toEqual([
      { codec: 'lz4', firstOffset: 0, lastOffset: 2, misframed: 1 },
      { codec: 'lz4', firstOffset: 3, lastOffset: 4, misframed: 2 },
    ]);
    expect(notices.take(records)).toEqual([]);
  });
});

describe('a batch no framing reads is a corrupt batch, named', () => {
  it('its codec refuses it with its offsets: the partition stops there, nothing invented from it', async () => {
    const batch = await producedBatch([Buffer.from('a'), Buffer.from('b')]);
    // The header says three records; the CRC is made right again (a producer can make it so).
    const body = batch.subarray(12);
    body.writeInt32BE(3, 57 - 12);
    const { crc32c } = await import('@node-rs/crc32');
    body.writeUInt32BE(crc32c(body.subarray(21 - 12)), 17 - 12);
    const error = await decodeBatch(new Decoder(batch)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CorruptCompressedBatchError);
    expect((error as Error).message).toMatch(/offsets 500-501\): its records do not read as its header says/);
  });
});
