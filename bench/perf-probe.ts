/**
 * End-to-end probe for tuning: produce N JSON log records (~800 B) into a 6-partition
 * topic once (reused by name on later runs), then run one replica (`bin/kafka-lance run`,
 * defaults unless --set is given) with a fresh group and data dir, and time from its
 * group join until every record is published into Lance (sum of `rows` in its
 * `publication` log lines). RSS of the replica (one process: the staging workers and
 * the materializer are threads) is read from /proc every 250 ms.
 *
 *   npm run build && node dist/bench/perf-probe.js --records 300000 [--mode buffered|streamed]
 *     [--set '{"materializer":{"maxPublicationBytes":33554432}}'] [--node-args '--cpu-prof']
 *     [--bin /other/checkout/bin/kafka-lance --malloc-tuning off]   (a baseline side by side)
 *     [--log file] [--keep 1]
 *
 * Brokers: KAFKA_BOOTSTRAP_SERVERS (default 127.0.0.1:9092). Prints one JSON line.
 */
import { spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Kafka, Partitioners, logLevel } from 'kafkajs';
import { withMallocTuning } from '../src/common/malloc-tuning';
import { benchArgs } from './args';

const args = benchArgs();
const RECORDS = Number(args.get('records') ?? 300_000);
const PARTITIONS = 6;
const MODE = args.get('mode') ?? 'buffered';
const brokers = (process.env.KAFKA_BOOTSTRAP_SERVERS ?? '127.0.0.1:9092').split(',');

function record(n: number): string {
  const base = {
    ts: new Date(1_796_000_000_000 + n).toISOString(),
    level: ['info', 'warn', 'error', 'debug'][n % 4],
    service: `svc-${n % 17}`,
    host: `host-${n % 64}.eu-west-1.internal`,
    status: [200, 201, 404, 500][n % 4],
    latency_ms: (n * 13.37) % 1000,
    trace_id: (n * 2654435761).toString(16).padStart(32, '0'),
    message: '',
  };
  const filler = `request ${n} handled upstream cache miss retry shard ${n % 97} `;
  base.message = filler.repeat(Math.ceil(600 / filler.length)).slice(0, 600);
  return JSON.stringify(base);
}

/** Produce the topic unless it already holds RECORDS records; returns its JSON bytes. */
async function ensureTopic(kafka: Kafka, topic: string): Promise<number> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const topics = await admin.listTopics();
    if (topics.includes(topic)) {
      const ends = await admin.fetchTopicOffsets(topic);
      if (ends.reduce((s, e) => s + Number(e.high), 0) === RECORDS) return bytesOf();
      await admin.deleteTopics({ topics: [topic] });
      await new Promise((r) => setTimeout(r, 2000));
    }
    await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS }], waitForLeaders: true });
  } finally {
    await admin.disconnect();
  }
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  for (let start = 0; start < RECORDS; start += 12_000) {
    await Promise.all(
      Array.from({ length: PARTITIONS }, (_, p) => {
        const values: string[] = [];
        for (let n = start + p; n < Math.min(RECORDS, start + 12_000); n += PARTITIONS)
          values.push(record(n));
        return producer.send({ topic, acks: -1, messages: values.map((value) => ({ partition: p, value })) });
      }),
    );
  }
  await producer.disconnect();
  return bytesOf();
}

function bytesOf(): number {
  let bytes = 0;
  for (let n = 0; n < RECORDS; n += 1) bytes += Buffer.byteLength(record(n));
  return bytes;
}

function merge(into: Record<string, unknown>, from: Record<string, unknown>): Record<string, unknown> {
  for (const [k, v] of Object.entries(from)) {
    const cur = into[k];
    if (v && typeof v === 'object' && !Array.isArray(v) && cur && typeof cur === 'object') {
      merge(cur as Record<string, unknown>, v as Record<string, unknown>);
    } else into[k] = v;
  }
  return into;
}

async function main(): Promise<void> {
  const kafka = new Kafka({ clientId: 'probe', brokers, logLevel: logLevel.NOTHING });
  const topic = args.get('topic') ?? `probe-${RECORDS}`;
  const bytes = await ensureTopic(kafka, topic);

  const work = await fsp.mkdtemp(path.join(args.get('work') ?? os.tmpdir(), 'kl-probe-'));
  const name = `probe${Date.now()}`;
  const definition = merge(
    {
      name,
      topics: [topic],
      schema: {
        fields: {
          ts: 'timestamp',
          level: 'string',
          service: 'string',
          host: 'string',
          status: 'int32',
          latency_ms: 'float64',
          trace_id: 'string',
          message: 'string',
        },
      },
      deadLetter: { file: path.join(work, 'dlq.jsonl') },
      materializer: { pipelinePreparation: MODE === 'streamed' },
    },
    JSON.parse(args.get('set') ?? '{}') as Record<string, unknown>,
  );
  const file = path.join(work, 'consumer.json');
  await fsp.writeFile(file, JSON.stringify(definition));
  const bin = args.get('bin') ?? path.resolve(__dirname, '../../bin/kafka-lance');
  const nodeArgs = (args.get('node-args') ?? '').split(' ').filter(Boolean);
  const started = performance.now();
  const child = spawn(
    process.execPath,
    [
      ...nodeArgs,
      bin,
      'run',
      '-c',
      file,
      '--data-dir',
      work,
      '--brokers',
      brokers.join(','),
      '--metrics-port',
      '0',
    ],
    // The environment bin/kafka-lance gives itself when run as a program (not through node).
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      cwd: args.get('cwd') ?? work,
      env: args.get('malloc-tuning') === 'off' ? process.env : withMallocTuning(),
    },
  );
  // However this probe ends, its replica ends with it (a replica left running skews every later run).
  process.on('exit', () => child.exitCode === null && child.kill('SIGKILL'));
  let joinedAt = 0;
  let rows = 0;
  let doneAt = 0;
  let pending = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    if (args.has('log')) void fsp.appendFile(args.get('log')!, lines.map((l) => `${l}\n`).join(''));
    for (const line of lines) {
      if (!joinedAt && line.includes('"event":"kafka.join"')) joinedAt = performance.now();
      if (line.includes('"event":"publication"')) {
        rows += publishedRows(line);
        if (rows >= RECORDS && !doneAt) doneAt = performance.now();
      }
    }
  });
  let peakRss = 0;
  let peakAnon = 0;
  let peakFile = 0;
  let cpuSeconds = 0;
  let mainCpuSeconds = 0;
  const ticks = 100; // USER_HZ on Linux
  const samples: number[] = [];
  const rssTimer = setInterval(() => {
    void fsp
      .readFile(`/proc/${child.pid}/status`, 'utf8')
      .then((s) => {
        const rss = Number(/VmRSS:\s+(\d+)/.exec(s)?.[1] ?? 0) * 1024;
        samples.push(rss);
        if (rss > peakRss) {
          // What the peak is made of: anonymous memory (heaps, ArrayBuffers, malloc arenas)
          // against mapped files (node and LanceDB's native binary, counted once loaded).
          peakAnon = Number(/RssAnon:\s+(\d+)/.exec(s)?.[1] ?? 0) * 1024;
          peakFile = Number(/RssFile:\s+(\d+)/.exec(s)?.[1] ?? 0) * 1024;
        }
        peakRss = Math.max(peakRss, rss);
      })
      .catch(() => undefined);
    void fsp
      .readFile(`/proc/${child.pid}/stat`, 'utf8')
      .then((s) => {
        // Fields after the command name: utime and stime are the 12th and 13th.
        const fields = s.slice(s.lastIndexOf(')') + 2).split(' ');
        if (!doneAt) cpuSeconds = (Number(fields[11]) + Number(fields[12])) / ticks;
      })
      .catch(() => undefined);
    // The main thread alone (its tid is the pid): kafkajs decoding and packing for the workers.
    void fsp
      .readFile(`/proc/${child.pid}/task/${child.pid}/stat`, 'utf8')
      .then((s) => {
        const fields = s.slice(s.lastIndexOf(')') + 2).split(' ');
        if (!doneAt) mainCpuSeconds = (Number(fields[11]) + Number(fields[12])) / ticks;
      })
      .catch(() => undefined);
  }, 250);
  const limitMs = Number(args.get('timeout-s') ?? 600) * 1000;
  while (!doneAt && performance.now() - started < limitMs && child.exitCode === null) {
    await new Promise((r) => setTimeout(r, 100));
  }
  clearInterval(rssTimer);
  child.kill('SIGTERM');
  await new Promise((r) => (child.exitCode === null ? child.on('exit', r) : r(null)));
  if (!args.has('keep')) await fsp.rm(work, { recursive: true, force: true });
  const seconds = ((doneAt || performance.now()) - joinedAt) / 1000;
  const mib = bytes / 1024 / 1024;
  const sorted = [...samples].sort((a, b) => a - b);
  console.log(
    JSON.stringify({
      records: RECORDS,
      mode: MODE,
      done: rows >= RECORDS,
      rows,
      inputMiB: Math.round(mib),
      seconds: Number(seconds.toFixed(2)),
      mibPerSecond: Number((mib / seconds).toFixed(1)),
      peakRssMiB: Math.round(peakRss / 1024 / 1024),
      peakRssAnonMiB: Math.round(peakAnon / 1024 / 1024),
      peakRssFileMiB: Math.round(peakFile / 1024 / 1024),
      cpuSeconds,
      cpuSecondsPerGiB: Number((cpuSeconds / (mib / 1024)).toFixed(1)),
      mainThreadCpuSecondsPerGiB: Number((mainCpuSeconds / (mib / 1024)).toFixed(1)),
      p50RssMiB: Math.round((sorted[Math.floor(sorted.length / 2)] ?? 0) / 1024 / 1024),
      set: args.get('set') ?? '',
      work: args.has('keep') ? work : undefined,
    }),
  );
}

/**
 * A publication line's rows. V8's trace flags (`--node-args '--trace-gc'`) write to the same
 * stdout and can run into a log line: read from its first brace, and count an unreadable line
 * as none rather than let it end the probe with its replica left running.
 */
function publishedRows(line: string): number {
  try {
    return Number((JSON.parse(line.slice(line.indexOf('{'))) as { rows?: number }).rows ?? 0);
  } catch {
    return 0;
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
