/**
 * Decode throughput: the staging workers' decoder (src/decode) on the bench's ~800-byte
 * JSON log records in the bench's declared schema (bench/lib/records.ts), in this one
 * thread, nothing staged: the native JSON decoder (native/json-columns) and the
 * TypeScript one in alternating rounds (`cpuSecondsPerGiB` per round in `rounds`). Rates are per CPU second of this process, so that other load
 * on a shared machine moves them less than wall time would; the median of the rounds
 * is the figure, the rounds show the spread.
 *
 * It also times the JSON stage alone, both ways in alternating rounds of the same run:
 * `walk` (parseJsonExact: JSON.parse, then a walk of the values for a number beyond
 * 2^53) and `scan` (mayHoldUnsafeInteger on the bytes, then JSON.parse or
 * parseJsonExact: what the decoder does).
 *
 * `--format avro` decodes the same records as Avro in the Confluent wire format (ts a
 * timestamp-millis, attrs a map of strings), as a registry-backed consumer does: `native` is
 * the compiled reader, `typescript` the reference decoder it falls back to. `--format protobuf`:
 * the e2e-protobuf arm's messages (bench/lib/protobuf-arm.ts), the same two ways.
 *
 *   npm run build && node dist/bench/decode-throughput.js [--rounds 7] [--batches 50] [--format avro|protobuf]
 */
import * as avro from 'avsc';
import { resolveConsumer } from '../src/config';
import { mayHoldUnsafeInteger, parseJsonExact } from '../src/decode/exact-json';
import { RecordDecoder, type RawMessage } from '../src/decode/record-decoder';
import { packMessages, unpackMessages } from '../src/pool/packed-messages';
import { benchArgs } from './args';
import { LOG_PROTO, protobufEncoder } from './lib/protobuf-arm';
import { BENCH_FIELDS, benchRecord } from './lib/records';

const args = benchArgs();
const ROUNDS = Number(args.get('rounds') ?? 7);
const BATCHES = Number(args.get('batches') ?? 50);
const BATCH_ROWS = 2_000;
const FORMAT = args.get('format') ?? 'json';
if (FORMAT !== 'json' && FORMAT !== 'avro' && FORMAT !== 'protobuf')
  throw new Error('--format json, avro or protobuf');

/** The bench's log record as an Avro writer schema (the JSON arm's columns, attrs as a map). */
const AVRO_SCHEMA = {
  type: 'record',
  name: 'Log',
  fields: [
    { name: 'ts', type: { type: 'long', logicalType: 'timestamp-millis' } },
    ...['level', 'service', 'host', 'message'].map((name) => ({ name, type: 'string' })),
    { name: 'status', type: 'int' },
    { name: 'latency_ms', type: 'double' },
    { name: 'trace_id', type: 'string' },
    { name: 'attrs', type: { type: 'map', values: 'string' } },
  ],
};
const AVRO_ID = 1;
const avroType = avro.Type.forSchema(AVRO_SCHEMA as avro.Schema);

function avroValue(json: string): Buffer {
  const r = JSON.parse(json) as Record<string, unknown>;
  const attrs = Object.fromEntries(Object.entries(r.attrs as object).map(([k, v]) => [k, String(v)]));
  const payload = avroType.toBuffer({ ...r, ts: Date.parse(r.ts as string), attrs });
  const header = Buffer.alloc(5);
  header.writeUInt32BE(AVRO_ID, 1);
  return Buffer.concat([header, payload]);
}

/** The bench's log record as a framed AppLog of bench/lib/protobuf-arm.ts (the e2e-protobuf arm's values). */
const protobufValue = protobufEncoder(AVRO_ID);

const consumer = resolveConsumer(
  FORMAT !== 'json'
    ? {
        name: 'bench',
        brokers: ['127.0.0.1:1'],
        topics: ['bench'],
        format: FORMAT,
        schema: 'infer',
        schemaRegistry: { url: 'http://127.0.0.1:1' },
      }
    : { name: 'bench', brokers: ['127.0.0.1:1'], topics: ['bench'], schema: { fields: BENCH_FIELDS } },
  'bench',
);
/**
 * Both decoders, timed in alternating rounds: for JSON the native and the TypeScript one; for
 * Avro the compiled reader (src/decode/avro/compiled-reader.ts) and the reference (avsc, rows, codecs).
 */
const decoders = {
  native: new RecordDecoder(consumer, Date.now, 'native'),
  typescript: new RecordDecoder(consumer, Date.now, 'typescript'),
};
if (FORMAT === 'json' && !decoders.native.native)
  throw new Error('the native JSON decoder is not built (npm run build builds it when cargo is on PATH)');
const ways = ['native', 'typescript'] as const;
const schemas =
  FORMAT === 'avro'
    ? [{ id: AVRO_ID, schemaType: 'AVRO', schema: JSON.stringify(AVRO_SCHEMA) }]
    : FORMAT === 'protobuf'
      ? [{ id: AVRO_ID, schemaType: 'PROTOBUF', schema: LOG_PROTO }]
      : [];
const now = Date.now();
// Packed and unpacked as the staging pool hands batches to its workers: views into one buffer.
const pool: RawMessage[][] = Array.from({ length: 10 }, (_, b) =>
  unpackMessages(
    packMessages(
      Array.from({ length: BATCH_ROWS }, (_, i) => {
        const json = benchRecord(b * BATCH_ROWS + i, now);
        return {
          offset: String(b * BATCH_ROWS + i),
          timestamp: String(now),
          key: null,
          value:
            FORMAT === 'avro'
              ? avroValue(json)
              : FORMAT === 'protobuf'
                ? protobufValue(json)
                : Buffer.from(json),
        };
      }),
    ),
  ),
);
const batchBytes = pool.flat().reduce((n, m) => n + m.value!.byteLength, 0) / pool.length;
for (const way of ways)
  for (let w = 0; w < 20; w++) decoders[way].decode('bench', 0, pool[w % pool.length]!, '', schemas); // warm-up (JIT)

const GIB = 1024 ** 3;
const cpuSeconds = (used: NodeJS.CpuUsage) => (used.user + used.system) / 1e6;

type Round = { recordsPerCpuSecond: number; mibPerCpuSecond: number; cpuSecondsPerGiB: number };
const roundsOf: Record<(typeof ways)[number], Round[]> = { native: [], typescript: [] };
for (let r = 0; r < ROUNDS * ways.length; r++) {
  const way = ways[r % ways.length]!;
  const start = process.cpuUsage();
  let rows = 0;
  for (let b = 0; b < BATCHES; b++) {
    const out = decoders[way].decode('bench', 0, pool[b % pool.length]!, '', schemas);
    if (out.deadLetters.length > 0) throw new Error(`${out.deadLetters.length} dead letters`);
    rows += out.rows;
  }
  const seconds = cpuSeconds(process.cpuUsage(start));
  roundsOf[way].push({
    recordsPerCpuSecond: Math.round(rows / seconds),
    mibPerCpuSecond: Number(((batchBytes * BATCHES) / seconds / 1024 / 1024).toFixed(1)),
    cpuSecondsPerGiB: Number(((seconds * GIB) / (batchBytes * BATCHES)).toFixed(2)),
  });
}
const summary = (rounds: Round[]) =>
  rounds.length === 0
    ? undefined
    : {
        median: [...rounds].sort((a, b) => a.recordsPerCpuSecond - b.recordsPerCpuSecond)[
          Math.floor(rounds.length / 2)
        ],
        rounds: rounds.map((r) => r.cpuSecondsPerGiB),
      };

// The JSON stage alone (UTF-8 decode included), old and new way in alternating rounds.
const utf8 = new TextDecoder('utf-8', { fatal: true });
const parsers = {
  walk: (bytes: Uint8Array) => parseJsonExact(utf8.decode(bytes)),
  scan: (bytes: Uint8Array) => {
    const text = utf8.decode(bytes);
    return mayHoldUnsafeInteger(bytes) ? parseJsonExact(text) : (JSON.parse(text) as unknown);
  },
};
const parseSeconds: Record<keyof typeof parsers, number[]> = { walk: [], scan: [] };
// (JSON records only: Avro values are not text.)
for (let r = 0; r < (FORMAT === 'json' ? ROUNDS * 2 : 0); r++) {
  const way = r % 2 === 0 ? 'walk' : 'scan';
  const parse = parsers[way];
  const start = process.cpuUsage();
  for (let b = 0; b < BATCHES; b++) for (const m of pool[b % pool.length]!) parse(m.value!);
  parseSeconds[way].push(cpuSeconds(process.cpuUsage(start)));
}
const medianOf = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const perGiB = (seconds: number) => Number(((seconds * GIB) / (batchBytes * BATCHES)).toFixed(2));

console.log(
  JSON.stringify(
    {
      format: FORMAT,
      recordBytes: Math.round(batchBytes / BATCH_ROWS),
      records: BATCHES * BATCH_ROWS,
      native: summary(roundsOf.native),
      typescript: summary(roundsOf.typescript),
      jsonStageCpuSecondsPerGiB: FORMAT === 'json' && {
        walk: perGiB(medianOf(parseSeconds.walk)),
        scan: perGiB(medianOf(parseSeconds.scan)),
        walkRounds: parseSeconds.walk.map(perGiB),
        scanRounds: parseSeconds.scan.map(perGiB),
      },
    },
    null,
    2,
  ),
);
