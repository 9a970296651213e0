/**
 * The main thread's per-record cost of kafkajs's record decoding: a record batch of 2,000
 * ~800-byte records decoded by kafkajs 2.2.4's record batch decoder with its own record
 * decoder, then with `decodeRecord` (src/kafka/protocol/record-batch.ts) on each record's cut,
 * then by the replica's batch decoder, which reads them in place
 * (src/kafka/protocol/record-batch-decoder.ts), alternately in one process (CPU ns per record,
 * 100 batches a round). `--headers 2` gives every record two headers (a trace id and a span
 * name, as tracing producers add).
 *
 *   npm run build && node dist/bench/record-decoding.js [--rounds 5] [--headers 2]
 */
import * as path from 'node:path';
import { decodeRecord } from '../src/kafka/protocol/record-batch';
import { decodeRecordBatch } from '../src/kafka/protocol/record-batch-decoder';
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
  const args = benchArgs();
  const rounds = Number(args.get('rounds') ?? 5);
  const headerCount = Number(args.get('headers') ?? 0);
  const value = Buffer.alloc(800, 'a');
  const headers = (i: number): Record<string, string> =>
    Object.fromEntries(
      Array.from({ length: headerCount }, (_, h) => [
        h === 0 ? 'traceparent' : `span-${h}`,
        `00-4bf92f3577b34da6a3ce929d0e0e${String(i).padStart(4, '0')}-00f067aa0ba902b7-01`,
      ]),
    );
  const records = Array.from({ length: RECORDS }, (_, i) =>
    Record({ offsetDelta: i, timestampDelta: i * 3, key: null, value, headers: headers(i) }),
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
  const inPlace = decodeRecordBatch as unknown as BatchDecoder;
  // Each as kafkajs's consumer reads a record (a record read in place has getters for these).
  const shown = async (decode: BatchDecoder) =>
    JSON.stringify(
      (await decode(new Decoder(buffer))).records.map((r) => {
        const { offset, timestamp, key, value, headers } = r as unknown as Record<string, unknown>;
        return { offset, timestamp, key, value, headers };
      }),
    );
  const reference = await shown(kafkajs);
  if ((await shown(ours)) !== reference || (await shown(inPlace)) !== reference)
    throw new Error('the decoders disagree');
  const results: {
    kafkajsNsPerRecord: number;
    decodeRecordNsPerRecord: number;
    inPlaceNsPerRecord: number;
  }[] = [];
  for (let r = 0; r < rounds; r++) {
    results.push({
      kafkajsNsPerRecord: Math.round(await nsPerRecord(kafkajs, buffer)),
      decodeRecordNsPerRecord: Math.round(await nsPerRecord(ours, buffer)),
      inPlaceNsPerRecord: Math.round(await nsPerRecord(inPlace, buffer)),
    });
  }
  console.log(
    JSON.stringify({
      bench: path.basename(__filename, '.js'),
      records: RECORDS,
      headers: headerCount,
      rounds: results,
    }),
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
