/**
 * The vector arm: 768-dimension float32 embeddings (the size of many sentence models)
 * through kafka-lance, sent as JSON arrays of numbers and as base64 of their
 * little-endian bytes. Two measurements per encoding:
 *
 * - decode: the staging workers' decoder (src/decode) in this one thread, per CPU second
 *   (median of rounds), nothing staged: what the JSON or base64 parse costs;
 * - end to end: a topic of `--records` base64 records (a quarter as many JSON arrays, about
 *   the same MiB), one replica (`bin/kafka-lance run`, defaults, no index) and then the Python
 *   peer (bench/arms/naive-vector-consumer.py: confluent-kafka, orjson, numpy, pylance), each
 *   timed from its group join to its last row in Lance, charged its own CPU from its first
 *   record to its last row, and the replica's CPU per thread (where the time goes).
 *
 * Beside the log records of `npm run bench` (bench/report.md): MiB/s of the message bytes.
 *
 *   npm run build && node dist/bench/vector-throughput.js [--records 200000] [--rounds 5]
 *
 * Brokers: KAFKA_BOOTSTRAP_SERVERS, else a local broker (deploy/kafka-local) started and stopped here.
 */
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Partitioners } from 'kafkajs';
import { clusteredEmbeddings } from '../src/cli/clustered-embeddings';
import { resolveConsumer } from '../src/config';
import { RecordDecoder, type RawMessage } from '../src/decode/record-decoder';
import { benchArgs } from './args';
import { runChildArm } from './lib/child-arm';
import { stageAccount, summarizeProfiles } from './lib/cpu-profile';
import { ensureBroker, kafkaClient, topicRecords } from './lib/kafka';
import { ensureVenv } from './lib/python-venv';
import { runReplicaArm } from './lib/replica-arm';
import type { ArmResult } from './lib/result';

const REPO = path.resolve(__dirname, '../..');
const args = benchArgs();
// Base64 records are ~4 KB and JSON arrays ~16 KB: the JSON topic gets a quarter as many records (~the same MiB).
const BASE64_RECORDS = Number(args.get('records') ?? 200_000);
const RECORDS = { base64: BASE64_RECORDS, json: Math.round(BASE64_RECORDS / 4) } as const;
const ROUNDS = Number(args.get('rounds') ?? 5);
/** `--profile`: each encoding's native replica once more under --cpu-prof, for the per-stage account. */
const PROFILE = process.argv.includes('--profile');
const DIM = 768;
const PARTITIONS = 3;
const BATCH_ROWS = 1_000;
const MiB = 1024 * 1024;
const ENCODINGS = ['base64', 'json'] as const;
type Encoding = (typeof ENCODINGS)[number];

const FIELDS = { id: { type: 'int64', nullable: false }, embedding: { type: 'vector', dim: DIM } } as const;
const data = clusteredEmbeddings({ dim: DIM, clusters: 16, seed: 3 });
const pool = Array.from({ length: 2_000 }, () => data.next().vector);

function record(id: number, encoding: Encoding): string {
  const v = pool[id % pool.length]!;
  const embedding = encoding === 'json' ? v : Buffer.from(new Float32Array(v).buffer).toString('base64');
  return JSON.stringify({ id, embedding });
}

interface DecodeFigure {
  readonly recordBytes: number;
  readonly recordsPerCpuSecond: number;
  readonly mibPerCpuSecond: number;
}

function decodeOnly(encoding: Encoding): DecodeFigure {
  const decoder = new RecordDecoder(
    resolveConsumer(
      { name: 'bench', brokers: ['127.0.0.1:1'], topics: ['bench'], schema: { fields: FIELDS } },
      'bench',
    ),
  );
  const batch: RawMessage[] = Array.from({ length: BATCH_ROWS }, (_, i) => ({
    offsetNumber: i,
    timestampNumber: Date.now(),
    key: null,
    value: Buffer.from(record(i, encoding)),
  }));
  const bytes = batch.reduce((n, m) => n + m.value!.byteLength, 0);
  for (let w = 0; w < 5; w++) decoder.decode('bench', 0, batch); // warm-up (JIT)
  const rates: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const start = process.cpuUsage();
    for (let b = 0; b < 10; b++) {
      const out = decoder.decode('bench', 0, batch);
      if (out.deadLetters.length > 0) throw new Error(`${out.deadLetters.length} dead letters`);
    }
    const used = process.cpuUsage(start);
    rates.push((10 * BATCH_ROWS) / ((used.user + used.system) / 1e6));
  }
  const median = [...rates].sort((a, b) => a - b)[Math.floor(rates.length / 2)]!;
  const recordBytes = bytes / BATCH_ROWS;
  return {
    recordBytes: Math.round(recordBytes),
    recordsPerCpuSecond: Math.round(median),
    mibPerCpuSecond: Number(((median * recordBytes) / MiB).toFixed(1)),
  };
}

/** The topic of `records` vectors in `encoding`, produced once (a rerun with the same count reuses it). */
async function vectorTopic(
  brokers: readonly string[],
  encoding: Encoding,
  records: number,
): Promise<{ topic: string; bytes: number }> {
  const topic = `bench-vectors-${encoding}-${records}`;
  let bytes = 0;
  for (let id = 0; id < records; id++) bytes += Buffer.byteLength(record(id, encoding));
  const kafka = kafkaClient(brokers);
  const admin = kafka.admin();
  await admin.connect();
  try {
    const existing = await topicRecords(admin, topic);
    if (existing === records) return { topic, bytes };
    if (existing !== undefined) {
      await admin.deleteTopics({ topics: [topic] });
      await new Promise((r) => setTimeout(r, 2_000));
    }
    await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS }], waitForLeaders: true });
  } finally {
    await admin.disconnect();
  }
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  const perSend = encoding === 'json' ? 200 : 500;
  for (let start = 0; start < records; start += perSend * PARTITIONS) {
    const sends: Promise<unknown>[] = [];
    for (let p = 0; p < PARTITIONS; p++) {
      const from = start + p * perSend;
      const messages = Array.from({ length: Math.max(0, Math.min(perSend, records - from)) }, (_, i) => ({
        partition: p,
        value: record(from + i, encoding),
      }));
      if (messages.length) sends.push(producer.send({ topic, acks: -1, messages }));
    }
    await Promise.all(sends);
  }
  await producer.disconnect();
  console.error(`produced ${records} ${encoding} vectors (${(bytes / MiB).toFixed(0)} MiB) into ${topic}`);
  return { topic, bytes };
}

/** `--profile`: CPU s per GiB by stage of each encoding's profiled native replica. */
const stageAccounts = new Map<Encoding, Record<string, number>>();

/** One replica (defaults, no index) and the Python peer on the same topic, one after the other. */
async function endToEnd(
  brokers: string[],
  encoding: Encoding,
  records: number,
  python: string,
): Promise<ArmResult[]> {
  const { topic, bytes } = await vectorTopic(brokers, encoding, records);
  const log = (l: string) => console.error(l);
  // Before the native vector decoder, a consumer with a vector field was decoded by the
  // TypeScript decoder alone, which KAFKA_LANCE_NATIVE_JSON=off brings back: both side by side.
  const typescript = await runReplicaArm(
    {
      id: `kafka-lance-${encoding}-typescript`,
      label: `kafka-lance run, defaults, vectors as ${encoding}, TypeScript decoder (KAFKA_LANCE_NATIVE_JSON=off)`,
      topic,
      records,
      bytes,
      brokers,
      extra: { schema: { fields: FIELDS } },
      env: { KAFKA_LANCE_NATIVE_JSON: 'off' },
    },
    log,
  );
  const replica = await runReplicaArm(
    {
      id: `kafka-lance-${encoding}`,
      label: `kafka-lance run, defaults, vectors as ${encoding}`,
      topic,
      records,
      bytes,
      brokers,
      extra: { schema: { fields: FIELDS } },
    },
    log,
  );
  const lance = await fsp.mkdtemp(path.join(os.tmpdir(), 'kl-bench-vectors-py-'));
  try {
    const peer = await runChildArm(
      {
        id: `naive-python-${encoding}`,
        label: `naive Python (confluent-kafka → orjson → numpy → pylance append → commit), vectors as ${encoding}`,
        command: python,
        args: [
          path.join(REPO, 'bench', 'arms', 'naive-vector-consumer.py'),
          ...['--records', String(records), '--brokers', brokers.join(','), '--topic', topic],
          ...['--group', `bench-vectors-py-${Date.now()}`, '--lance', path.join(lance, 'table')],
          ...['--dim', String(DIM)],
        ],
        expectedRows: records,
        writes: true,
      },
      log,
    );
    if (!PROFILE) return [typescript, replica, peer];
    const dir = path.join(lance, 'cpu-profiles');
    const profiled = await runReplicaArm(
      {
        id: `profile-${encoding}`,
        label: `kafka-lance run, defaults, vectors as ${encoding}, under --cpu-prof`,
        topic,
        records,
        bytes,
        brokers,
        extra: { schema: { fields: FIELDS } },
        nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${dir}`],
      },
      log,
    );
    const threads = await summarizeProfiles(dir);
    stageAccounts.set(encoding, stageAccount(threads, profiled.threadCpuSeconds, bytes / 1024 ** 3));
    return [typescript, replica, peer];
  } finally {
    await fsp.rm(lance, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const lines: string[] = [];
  const out = (l: string) => {
    lines.push(l);
    console.log(l);
  };
  out(`# Vector arm (${DIM}-dimension float32 embeddings)`);
  out('');
  out(
    `Generated by \`node dist/bench/vector-throughput.js --records ${BASE64_RECORDS}${PROFILE ? ' --profile' : ''}\` on ${new Date().toISOString()} (${os.cpus().length} cores, Node ${process.version}).`,
  );
  out('');
  out('| encoding | record bytes | decode records/CPU s | decode MiB/CPU s |');
  out('| --- | --- | --- | --- |');
  for (const e of ENCODINGS) {
    const d = decodeOnly(e);
    out(
      `| ${e} | ${d.recordBytes} | ${d.recordsPerCpuSecond.toLocaleString('en-US')} | ${d.mibPerCpuSecond} |`,
    );
  }
  const python = ensureVenv((l) => console.error(l));
  const broker = ensureBroker((l) => console.error(l));
  const arms: ArmResult[] = [];
  try {
    for (const e of ENCODINGS) arms.push(...(await endToEnd(broker.brokers, e, RECORDS[e], python)));
  } finally {
    broker.stop();
  }
  const gib = (a: ArmResult) => a.bytes / 1024 ** 3;
  const perGiB = (a: ArmResult) => a.cpuSeconds / gib(a);
  out('');
  out(
    'End to end, each arm alone on the same topic (3 partitions): MiB/s of the message values from the group join ' +
      '(the peer: its first assignment) to the last row in Lance; CPU from the process’s own accounting ' +
      '(every thread), from its first record to its last row:',
  );
  out('');
  out(
    '| arm | records | MiB | timed s | MiB/s | records/s | CPU s | CPU s / GiB | peak RSS MiB | other cores busy | rows check |',
  );
  out('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const a of arms)
    out(
      `| ${a.id} | ${a.rows.toLocaleString('en-US')} | ${(a.bytes / MiB).toFixed(0)} | ${a.seconds} | ${a.mibPerSecond} | ${a.recordsPerSecond.toLocaleString('en-US')} | ${a.cpuSeconds.toFixed(1)} | ${perGiB(a).toFixed(1)} | ${a.peakRssMiB} | ${a.otherCores} | ${a.problems.length ? `**${a.problems.join('; ')}**` : 'ok'} |`,
    );
  out('');
  for (const e of ENCODINGS) {
    const ours = arms.find((a) => a.id === `kafka-lance-${e}`);
    const peer = arms.find((a) => a.id === `naive-python-${e}`);
    if (!ours || !peer || ours.problems.length || peer.problems.length) continue;
    const ratio = ours.mibPerSecond / peer.mibPerSecond;
    out(
      `- ${ratio >= 1.5 ? 'PASS' : 'FAIL'}: ${e}: kafka-lance ≥ 1.5 × the Python peer's MiB/s (${ours.mibPerSecond} vs ${peer.mibPerSecond}: ${ratio.toFixed(2)} ×)`,
    );
    out(
      `- ${perGiB(ours) <= perGiB(peer) ? 'PASS' : 'FAIL'}: ${e}: kafka-lance CPU s/GiB ≤ the Python peer's (${perGiB(ours).toFixed(1)} vs ${perGiB(peer).toFixed(1)})`,
    );
  }
  const replicas = arms.filter((a) => a.stages);
  out('');
  out('CPU seconds per GiB of messages, per thread of the replica (same window):');
  out('');
  out(`| thread | ${replicas.map((a) => a.id).join(' | ')} |`);
  out(`| --- | ${replicas.map(() => '---').join(' | ')} |`);
  const threads = [...new Set(replicas.flatMap((a) => Object.keys(a.threadCpuSeconds)))].sort();
  for (const t of threads)
    out(`| ${t} | ${replicas.map((a) => ((a.threadCpuSeconds[t] ?? 0) / gib(a)).toFixed(1)).join(' | ')} |`);
  if (stageAccounts.size > 0) {
    out('');
    out(
      'Per-stage CPU account of the native replica (`--profile`: run once more under --cpu-prof; each JavaScript ' +
        'thread’s CPU split by the stage its samples were charged to, native threads by what they run; ' +
        'bench/lib/cpu-profile.ts), CPU s per GiB of messages:',
    );
    out('');
    const stages = [...new Set([...stageAccounts.values()].flatMap((a) => Object.keys(a)))];
    out(`| stage | ${[...stageAccounts.keys()].join(' | ')} |`);
    out(`| --- | ${[...stageAccounts.keys()].map(() => '---').join(' | ')} |`);
    for (const s of stages)
      out(`| ${s} | ${[...stageAccounts.values()].map((a) => (a[s] ?? 0).toFixed(2)).join(' | ')} |`);
  }
  out('');
  out('Where the replica waits: wall-clock phases (s since spawn) and stage totals from its /metrics:');
  out('');
  out(`| | ${replicas.map((a) => a.id).join(' | ')} |`);
  out(`| --- | ${replicas.map(() => '---').join(' | ')} |`);
  for (const k of Object.keys(replicas[0]?.phases ?? {}))
    out(`| ${k} | ${replicas.map((a) => a.phases?.[k] ?? '–').join(' | ')} |`);
  for (const k of Object.keys(replicas[0]?.stages ?? {}))
    out(`| ${k} | ${replicas.map((a) => a.stages?.[k] ?? '–').join(' | ')} |`);
  await fsp.writeFile(path.join(REPO, 'bench', 'vectors.md'), `${lines.join('\n')}\n`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
