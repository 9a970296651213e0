import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import fc from 'fast-check';
import {
  CorruptCompressedBatchError,
  registerCompressionCodecs,
} from '../../../src/kafka/protocol/compression';
import { FetchedRecord } from '../../../src/common/fetched-record';
import { decodeRecord, decodeRecordWithin, recordBases } from '../../../src/kafka/protocol/record-batch';
import { decodeRecordBatch, decodeRecordInPlace } from '../../../src/kafka/protocol/record-batch-decoder';
import { coveredThrough, fetchedBatch } from '../../../src/kafka/protocol/fetched-batch';
import { SeededRandom } from '../../support/seeded-random';

/**
 * Record batches decoded with each record read in place give what kafkajs 2.2.4's own
 * decoder gives. The hazards: a record's end missed (every later record of the batch read
 * from the wrong bytes, or a record lost), a compressed batch's records read from the
 * compressed bytes, header fields of the batch (transaction, control, timestamp type) lost,
 * a record whose length is not what its fields take read from its neighbour's bytes or
 * failing where kafkajs read it (a stopped partition), and a codec that cannot check the CRC.
 */

/* eslint-disable @typescript-eslint/no-require-imports -- kafkajs 2.2.4 internals, the reference */
type Decoder = Parameters<typeof decodeRecordBatch>[0];
const Decoder = require('kafkajs/src/protocol/decoder') as new (buffer: Buffer) => Decoder;
const Long = require('kafkajs/src/utils/long') as { fromValue(v: string | number): unknown };
const { RecordBatch: encodeBatch } = require('kafkajs/src/protocol/recordBatch/v0') as {
  RecordBatch: (batch: Record<string, unknown>) => Promise<{ buffer: Buffer }>;
};
const encodeRecord = require('kafkajs/src/protocol/recordBatch/record/v0') as (
  record: Record<string, unknown>,
) => unknown;
const Encoder = require('kafkajs/src/protocol/encoder') as new () => {
  writeVarInt(value: number): { writeBuffer(buffer: Buffer): unknown };
};
/* eslint-enable @typescript-eslint/no-require-imports */

/**
 * kafkajs's own record batch decoder, loaded afresh with kafkajs's own record decoder: the
 * reference, whatever this process installed.
 */
function kafkajsDecoder(): (decoder: Decoder) => Promise<unknown> {
  let reference: (decoder: Decoder) => Promise<unknown> = () => Promise.reject(new Error('not loaded'));
  jest.isolateModules(() => {
    reference = require('kafkajs/src/protocol/recordBatch/v0/decoder') as typeof reference; // eslint-disable-line @typescript-eslint/no-require-imports
  });
  return reference;
}
const reference = kafkajsDecoder();

/** A record's fields as kafkajs's consumer reads them (a FetchedRecord's offset and timestamp are getters). */
function asRead(record: unknown): unknown {
  if (record === null || typeof record !== 'object' || !('offset' in record)) return record;
  const r = record as Record<string, unknown>;
  return {
    magicByte: r.magicByte,
    attributes: r.attributes,
    timestamp: r.timestamp,
    offset: r.offset,
    key: r.key,
    value: r.value,
    headers: r.headers,
    isControlRecord: r.isControlRecord,
    batchContext: r.batchContext,
  };
}

/** A decoded batch (or an error's outcome) with its records as kafkajs's consumer reads them. */
function asReadBatch(batch: unknown): unknown {
  if (batch === null || typeof batch !== 'object' || !('records' in batch)) return batch;
  const b = batch as { records: unknown[] };
  return { ...b, records: b.records.map(asRead) };
}

/** Attributes of the encoded batch: after its first offset, length, leader epoch, magic and CRC. */
const ATTRIBUTES_AT = 8 + 4 + 4 + 1 + 4;

async function batchBytes(
  records: { key: Buffer | null; value: Buffer | null; headers: Record<string, string> }[],
  options: { compression: number; transactional: boolean; extraAttributes: number; firstOffset: string },
): Promise<Buffer> {
  const encoded = await encodeBatch({
    compression: options.compression,
    transactional: options.transactional,
    firstOffset: Long.fromValue(options.firstOffset),
    firstTimestamp: 1_796_000_000_000,
    maxTimestamp: 1_796_000_009_999,
    lastOffsetDelta: Math.max(records.length - 1, 0),
    records: records.map((r, i) => encodeRecord({ ...r, offsetDelta: i, timestampDelta: i * 7 })),
  });
  const bytes = Buffer.from(encoded.buffer);
  bytes.writeInt16BE(bytes.readInt16BE(ATTRIBUTES_AT) | options.extraAttributes, ATTRIBUTES_AT);
  return bytes;
}

const bytesOrNull = fc.option(
  fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)),
  { freq: 5 },
);

test('every record batch decodes to what kafkajs decodes, compressed or not, whatever its flags', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.record({
          key: bytesOrNull,
          value: bytesOrNull,
          // Keys no Object.prototype property has: kafkajs's own header fold reads `toString` and
          // the like as already set (record-batch.test.ts covers how ours differs).
          headers: fc.dictionary(
            fc.string({ maxLength: 8 }).map((k) => `h-${k}`),
            fc.string({ maxLength: 12 }),
            { maxKeys: 3 },
          ),
        }),
        { maxLength: 40 },
      ),
      fc.record({
        compression: fc.constantFrom(0, 1), // none, gzip (kafkajs's own codec)
        transactional: fc.boolean(),
        // log append time (0x8), control batch (0x20)
        extraAttributes: fc.constantFrom(0, 0x8, 0x20, 0x28),
        firstOffset: fc.constantFrom('0', '4294967290', '9007199254740990'),
      }),
      async (records, options) => {
        const bytes = await batchBytes(records, options);
        // Two batches back to back: the first must end exactly where kafkajs's does.
        const twice = Buffer.concat([bytes, bytes]);
        const ours = new Decoder(twice);
        const theirs = new Decoder(twice);
        for (let batch = 0; batch < 2; batch++) {
          const expected = await reference(theirs);
          expect(withoutEmptyBatchMarker(asReadBatch(await decodeRecordBatch(ours)), expected)).toEqual(
            expected,
          );
          // The first must end exactly where kafkajs's does.
          expect(ours.offset).toBe(theirs.offset);
        }
      },
    ),
    { numRuns: 300 },
  );
});

/**
 * A batch of no records decodes to one control record at its last offset (kafkajs gives none):
 * that record checked, the batch as kafkajs reads it.
 */
function withoutEmptyBatchMarker(batch: unknown, kafkajs: unknown): unknown {
  const b = batch as { records: Record<string, unknown>[]; firstOffset: string; lastOffsetDelta: number };
  if ((kafkajs as { records: unknown[] }).records.length !== 0 || b.records.length !== 1) return batch;
  expect(b.records[0]).toMatchObject({
    offset: (BigInt(b.firstOffset) + BigInt(b.lastOffsetDelta)).toString(),
    isControlRecord: true,
    key: null,
    value: null,
  });
  return { ...b, records: [] };
}

describe('a record batch of no records (the log cleaner keeps one for a producer whose records were all superseded)', () => {
  test('decodes to one control record at its last offset, so the position moves past it', async () => {
    const bytes = await batchBytes([], {
      compression: 0,
      transactional: false,
      extraAttributes: 0,
      firstOffset: '9007199254740990',
    });
    const batch = (await decodeRecordBatch(new Decoder(bytes))) as { records: Record<string, unknown>[] };
    expect(await reference(new Decoder(bytes))).toMatchObject({ records: [] });
    expect(batch.records).toEqual([
      expect.objectContaining({ offset: '9007199254740990', isControlRecord: true, key: null, value: null }),
    ]);
    const covered = coveredThrough(
      fetchedBatch('t', '9007199254740990', { partition: 0, messages: batch.records }),
    );
    expect(covered).toBe(9007199254740990);
    expect(fetchedBatch('t', '9007199254740990', { partition: 0, messages: batch.records }).isEmpty()).toBe(
      true,
    );
  });

  test('a count damaged to 0 in front of records is no emptied batch: the position stays (a stall, never a skip)', async () => {
    const records = [0, 1, 2].map((i) => ({ key: null, value: Buffer.from(`v${i}`), headers: {} }));
    const bytes = await batchBytes(records, {
      compression: 0,
      transactional: false,
      extraAttributes: 0,
      firstOffset: '100',
    });
    // The record count: after the header's 57 bytes (first offset … first sequence).
    bytes.writeInt32BE(0, 57);
    const batch = (await decodeRecordBatch(new Decoder(bytes))) as { records: unknown[] };
    expect(batch.records).toEqual([]);
    expect(
      coveredThrough(fetchedBatch('t', '100', { partition: 0, messages: batch.records })),
    ).toBeUndefined();
  });
});

/** A record's bytes as a batch holds them (its varint length first), from kafkajs's encoder. */
function recordBytes(record: Record<string, unknown>): Buffer {
  return Buffer.from((encodeRecord(record) as { buffer: Buffer }).buffer);
}

/** `body` framed with a declared length of its own length + `lie`. */
function framed(body: Buffer, lie: number): unknown {
  return new Encoder().writeVarInt(body.length + lie).writeBuffer(body);
}

/** A record's body (its bytes after the length). */
function bodyOf(bytes: Buffer): Buffer {
  const decoder = new Decoder(bytes) as Decoder & { readVarInt(): number };
  decoder.readVarInt();
  return bytes.subarray(decoder.offset);
}

async function batchOf(records: readonly unknown[], compression: number): Promise<Buffer> {
  return Buffer.from(
    (
      await encodeBatch({
        compression,
        firstOffset: Long.fromValue('40'),
        firstTimestamp: 1_796_000_000_000,
        maxTimestamp: 1_796_000_000_000,
        lastOffsetDelta: records.length - 1,
        records,
      })
    ).buffer,
  );
}

/** What each decoder gives for `bytes` (its records, or the class of its error). */
async function bothRead(bytes: Buffer): Promise<[unknown, unknown]> {
  const read = (decode: (decoder: Decoder) => Promise<unknown>) =>
    decode(new Decoder(bytes)).catch((error: unknown) => ({ threw: (error as Error).constructor.name }));
  return [asReadBatch(await read(decodeRecordBatch)), await read(reference)];
}

describe('records whose length is not what their fields take, as producers can write them', () => {
  // kafkajs 2.2.4's producer given a Uint8Array value counts its bytes in the length but
  // writes String(value); a broker accepts it in a compressed batch (it checks compressed
  // records field by field, not against their lengths).
  const short = new TextEncoder().encode('{"id":1}');
  it.each([
    ['uncompressed, one record', 0, 1],
    ['gzip, one record', 1, 1],
    ['gzip, three records', 1, 3], // kafkajs itself fails on the second: so must we
  ])(
    'a value written longer than counted (%s): what kafkajs reads, not the next record’s bytes',
    async (_n, compression, count) => {
      const records = Array.from({ length: count }, (_, i) =>
        encodeRecord({ key: null, value: short, offsetDelta: i }),
      );
      const [ours, theirs] = await bothRead(await batchOf(records, compression));
      expect(ours).toEqual(theirs);
      if (count === 1) expect((ours as { records: unknown[] }).records).toHaveLength(1);
    },
  );

  it.each([0, 1])(
    'a record with trailing bytes, and a last one a byte short (codec %s): what kafkajs reads',
    async (compression) => {
      const first = bodyOf(recordBytes({ key: null, value: Buffer.from('first'), offsetDelta: 0 }));
      const second = bodyOf(
        recordBytes({ key: Buffer.from('k'), value: Buffer.from('second'), offsetDelta: 1 }),
      );
      const third = bodyOf(recordBytes({ key: null, value: Buffer.from('third'), offsetDelta: 2 }));
      const records = [
        framed(Buffer.concat([first, Buffer.from([9, 9, 9])]), 0), // three trailing bytes inside its length
        framed(second, 0),
        framed(third, -1), // the last: its header count lies past its length
      ];
      const [ours, theirs] = await bothRead(await batchOf(records, compression));
      expect(ours).toEqual(theirs);
      expect((ours as { records: { value: Buffer }[] }).records.map((r) => r.value.toString())).toEqual([
        'first',
        'second',
        'third',
      ]);
    },
  );

  // Read in place, the short record's header count is its neighbour's length (2,000 here):
  // 2,000 headers read from bytes that are not its own fail; its own cut has no header.
  it('a record a byte short whose neighbour’s bytes cannot be read as its headers: what kafkajs reads', async () => {
    const short = Buffer.from([0, 0, 0, 1, 2, 0x78]); // attributes, times, null key, value "x": no header count
    const next = bodyOf(recordBytes({ key: null, value: Buffer.from('next'), offsetDelta: 1 }));
    const records = [framed(short, 0), framed(Buffer.concat([next, Buffer.alloc(2_000 - next.length)]), 0)];
    const [ours, theirs] = await bothRead(await batchOf(records, 0));
    expect(ours).toEqual(theirs);
    expect((ours as { records: { value: Buffer }[] }).records.map((r) => r.value.toString())).toEqual([
      'x',
      'next',
    ]);
  });

  it('a record of negative length fails as it failed in kafkajs', async () => {
    const body = bodyOf(recordBytes({ key: null, value: Buffer.from('x'), offsetDelta: 0 }));
    for (const lie of [-body.length - 1, -body.length - 5]) {
      const [ours, theirs] = await bothRead(await batchOf([framed(body, lie)], 0));
      expect(theirs).toHaveProperty('threw');
      expect(ours).toEqual(theirs);
    }
  });
});

test('damaged records (any byte, the length included, a neighbour after them) read in place exactly as from their own cut, and leave the decoder where the cut does', () => {
  const random = new SeededRandom(51);
  const context = {
    firstOffset: '1000',
    firstTimestamp: '1796000000000',
    maxTimestamp: '1796000009999',
    magicByte: 2,
    isControlBatch: false,
    timestampType: 0,
    lastOffsetDelta: 9,
  };
  const outcome = (read: () => unknown) => {
    try {
      return read();
    } catch (error) {
      return { threw: (error as Error).constructor.name };
    }
  };
  const bases = recordBases(context)!;
  let inPlace = 0;
  for (let round = 0; round < 5_000; round++) {
    const own = recordBytes({
      key: random.next() < 0.3 ? null : Buffer.from(`k${round}`),
      value: random.next() < 0.1 ? null : Buffer.alloc(random.int(200), round & 0xff),
      headers: random.pick<Record<string, string | string[]>>([
        {},
        {},
        { h: 'v' },
        { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', empty: '' },
        { repeated: ['x', 'y', 'z'] },
      ]),
      offsetDelta: random.int(10),
      timestampDelta: random.int(1_000_000),
    });
    for (let flips = random.int(4); flips > 0; flips--) own[random.int(own.length)] = random.int(256);
    // A neighbour's bytes after it: a read past the record's end would find them.
    const bytes = Buffer.concat([
      own,
      recordBytes({ key: Buffer.from('neighbour'), value: Buffer.from('n'), offsetDelta: 9 }),
    ]);
    const ours = new Decoder(bytes) as Decoder & { offset: number };
    const cut = new Decoder(bytes) as Decoder & { offset: number; readVarIntBytes(): Buffer | null };
    const a = outcome(() => asRead(decodeRecordInPlace(ours, context, bases)));
    const b = outcome(() => decodeRecord(new Decoder(cut.readVarIntBytes()!), context));
    expect(a).toEqual(b);
    if (!('threw' in (a as object))) expect(ours.offset).toBe(cut.offset);
    if (decodeRecordWithin(bytes, 1, own.length, context, bases) instanceof FetchedRecord) inPlace += 1;
  }
  // Most undamaged plain records took the in-place path (the test is not all fallbacks).
  expect(inPlace).toBeGreaterThan(1_000);
});

test('a compressed batch’s codec is handed the records as a view of their batch, so its CRC is checked', async () => {
  registerCompressionCodecs();
  const bytes = await batchOf(
    [encodeRecord({ key: null, value: Buffer.from('checked'), offsetDelta: 0 })],
    3,
  );
  bytes[bytes.length - 2]! ^= 0xff; // a byte of the lz4 frame: the batch's CRC no longer matches
  const error: unknown = await decodeRecordBatch(new Decoder(bytes)).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(CorruptCompressedBatchError);
  // The codec found the batch around the records it was given: it names the batch's offsets.
  expect((error as CorruptCompressedBatchError).offsets).toEqual({ first: 40, last: 40 });
});

describe('installRecordBatchDecoder', () => {
  // As the replica loads it: a plain node process, on the build.
  it('is in place once the replica module is loaded, before any fetch', () => {
    const root = path.resolve(__dirname, '../../..');
    const script = `
      require('./dist/src/replica/replica.js');
      const f = require('./dist/src/kafka/protocol/fetched-batch.js');
      const d = require('./dist/src/kafka/protocol/record-batch-decoder.js');
      require('kafkajs/src/protocol/requests/fetch/v4/decodeMessages');
      process.stdout.write(JSON.stringify({
        installed: f.RECORD_DECODER_INSTALLED,
        used: require('kafkajs/src/protocol/recordBatch/v0/decoder') === d.decodeRecordBatch,
        again: d.installRecordBatchDecoder(),
      }));
    `;
    const out = execFileSync(process.execPath, ['-e', script], { cwd: root });
    expect(JSON.parse(out.toString())).toEqual({ installed: true, used: true, again: true });
  });
});
