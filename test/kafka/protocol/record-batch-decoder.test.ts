import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import fc from 'fast-check';
import { decodeRecordBatch } from '../../../src/kafka/protocol/record-batch-decoder';

/**
 * Record batches decoded with each record read in place give what kafkajs 2.2.4's own
 * decoder gives. The hazards: a record's end missed (every later record of the batch read
 * from the wrong bytes, or a record lost), a compressed batch's records read from the
 * compressed bytes, header fields of the batch (transaction, control, timestamp type) lost,
 * and a malformed record read from its neighbour's bytes without an error.
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
        expect(await decodeRecordBatch(ours)).toEqual(await reference(theirs));
        expect(ours.offset).toBe(theirs.offset);
        expect(await decodeRecordBatch(ours)).toEqual(await reference(theirs));
      },
    ),
    { numRuns: 300 },
  );
});

test('a record whose fields run past its length is an error, not its neighbour’s bytes', async () => {
  const bytes = await batchBytes(
    [
      { key: null, value: Buffer.from('first record value'), headers: {} },
      { key: null, value: Buffer.from('second'), headers: {} },
    ],
    { compression: 0, transactional: false, extraAttributes: 0, firstOffset: '0' },
  );
  // The first record's length is the varint right after the records' count (int32) at the
  // end of the batch header: make it claim fewer bytes than its fields take.
  const recordsAt = 8 + 4 + 4 + 1 + 4 + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4;
  const length = bytes[recordsAt]! >> 1; // a small zigzag varint
  bytes[recordsAt] = (length - 5) << 1;
  await expect(decodeRecordBatch(new Decoder(bytes))).rejects.toThrow(RangeError);
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
