/**
 * The main thread's per-record cost of kafkajs's record decoding: a record batch of 2,000
 * ~800-byte records decoded by kafkajs 2.2.4's record batch decoder with its own record
 * decoder, then with `decodeRecord` (src/kafka/protocol/record-batch.ts), alternately in one
 * process (CPU ns per record, 100 batches a round).
 *
 *   npm run build && node dist/bench/record-decoding.js [--rounds 5]
 */
import * as path from 'node:path';
import { decodeRecord } from '../src/kafka/protocol/record-batch';
import { benchArgs } from './args';

/* eslint-disable @typescript-eslint/no-require-imports -- kafkajs 2.2.4 internals */
type BatchDecoder = (decoder: unknown) => Promise<{ records: { offset: string; timestamp: string }[] }>;
const Decoder = require('kafkajs/src/protocol/decoder') as new (buffer: Buffer) => unknown;
const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0') as {
  RecordBatch: (batch: Record<string, unknown>) => Promise<{ buffer: Buffer }>;
};
const Record = require('kafkajs/src/protocol/recordBatch/record/v0') as (
  r: Record<string, unknown>,
) => unknown;

const BATCH_DECODER = require.resolve('kafkajs/src/protocol/recordBatch/v0/decoder');
const RECORD_DECODER = require.resolve('kafkajs/src/protocol/recordBatch/record/v0/decoder');

/** kafkajs's record batch decoder bound to `recordDecoder` (a fresh load of its module). */
function batchDecoderWith(recordDecoder: unknown): BatchDecoder {
  delete require.cache[BATCH_DECODER];
  require(RECORD_DECODER);
  const cached = require.cache[RECORD_DECODER]!;
  const original: unknown = cached.exports;
  cached.exports = recordDecoder;
  const decoder = require(BATCH_DECODER) as BatchDecoder;
  cached.exports = original;
  return decoder;
}
/* eslint-enable @typescript-eslint/no-require-imports */

const RECORDS = 2_000;
const BATCHES = 100;

async function nsPerRecord(decode: BatchDecoder, bytes: Buffer): Promise<number> {
  const start = process.cpuUsage();
  for (let i = 0; i < BATCHES; i++) await decode(new Decoder(bytes));
  const used = process.cpuUsage(start);
  return ((used.user + used.system) * 1000) / (BATCHES * RECORDS);
}

async function main(): Promise<void> {
  const rounds = Number(benchArgs().get('rounds') ?? 5);
  const value = Buffer.alloc(800, 'a');
  const records = Array.from({ length: RECORDS }, (_, i) =>
    Record({ offsetDelta: i, timestampDelta: i * 3, key: null, value }),
  );
  const { buffer } = await RecordBatch({
    firstOffset: '123456789',
    firstTimestamp: 1_796_000_000_000,
    maxTimestamp: 1_796_000_006_000,
    lastOffsetDelta: RECORDS - 1,
    records,
  });
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const kafkajs = batchDecoderWith(require(RECORD_DECODER));
  const ours = batchDecoderWith(decodeRecord);
  const [a, b] = [await kafkajs(new Decoder(buffer)), await ours(new Decoder(buffer))];
  if (JSON.stringify(a.records) !== JSON.stringify(b.records)) throw new Error('the decoders disagree');
  const results: { kafkajsNsPerRecord: number; decodeRecordNsPerRecord: number }[] = [];
  for (let r = 0; r < rounds; r++) {
    results.push({
      kafkajsNsPerRecord: Math.round(await nsPerRecord(kafkajs, buffer)),
      decodeRecordNsPerRecord: Math.round(await nsPerRecord(ours, buffer)),
    });
  }
  console.log(JSON.stringify({ bench: path.basename(__filename, '.js'), records: RECORDS, rounds: results }));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
