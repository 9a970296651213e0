/**
 * The vector arm: 768-dimension float32 embeddings (the size of many sentence models)
 * through kafka-lance, sent as JSON arrays of numbers and as base64 of their
 * little-endian bytes. Two measurements per encoding:
 *
 * - decode: the staging workers' decoder (src/decode) in this one thread, per CPU second
 *   (median of rounds), nothing staged: what the JSON or base64 parse costs;
 * - end to end: a topic of `--records` such records, one replica (`bin/kafka-lance run`,
 *   defaults, no index), timed from spawn to the last row visible in Lance, with the CPU of
 *   the replica's process tree and of each of its threads (where the time goes).
 *
 * Beside the log records of `npm run bench` (bench/report.md): MiB/s of the message bytes.
 *
 *   npm run build && node dist/bench/vector-throughput.js [--records 20000] [--rounds 5]
 *
 * Brokers: KAFKA_BOOTSTRAP_SERVERS, else a local broker (deploy/kafka-local) started and stopped here.
 */
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { Partitioners } from 'kafkajs';
import { clusteredEmbeddings } from '../src/cli/clustered-embeddings';
import { resolveConsumer } from '../src/config';
import { RecordDecoder, type RawMessage } from '../src/decode/record-decoder';
import { benchArgs } from './args';
import { ensureBroker, kafkaClient } from './lib/kafka';
import { ProcessTreeSampler, threadTaggedEnv } from './lib/proc-sampler';
import { ReplicaProcess } from '../src/harness/replica-process';

const REPO = path.resolve(__dirname, '../..');
const args = benchArgs();
const RECORDS = Number(args.get('records') ?? 20_000);
const ROUNDS = Number(args.get('rounds') ?? 5);
const DIM = 768;
const PARTITIONS = 3;
const BATCH_ROWS = 1_000;
const MiB = 1024 * 1024;
const ENCODINGS = ['json', 'base64'] as const;
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
    offset: i,
    timestamp: Date.now(),
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

interface EndToEnd {
  readonly records: number;
  readonly mib: number;
  readonly seconds: number;
  readonly cpuSeconds: number;
  readonly threads: Record<string, number>;
}

async function endToEnd(brokers: readonly string[], encoding: Encoding): Promise<EndToEnd> {
  const kafka = kafkaClient(brokers);
  const admin = kafka.admin();
  await admin.connect();
  const topic = `bench-vectors-${encoding}-${Date.now()}`;
  await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS }], waitForLeaders: true });
  await admin.disconnect();
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  let bytes = 0;
  for (let start = 0; start < RECORDS; start += 500) {
    const messages = Array.from({ length: Math.min(500, RECORDS - start) }, (_, i) => {
      const value = record(start + i, encoding);
      bytes += Buffer.byteLength(value);
      return { partition: (start + i) % PARTITIONS, value };
    });
    await producer.send({ topic, acks: -1, messages });
  }
  await producer.disconnect();

  const work = await fsp.mkdtemp(path.join(os.tmpdir(), `kl-bench-vectors-${encoding}-`));
  const tagDir = path.join(work, 'threads');
  await fsp.mkdir(tagDir);
  const file = path.join(work, 'consumer.json');
  await fsp.writeFile(
    file,
    JSON.stringify({
      name: `vectors-${encoding}-${Date.now()}`,
      topics: [topic],
      table: 'vectors',
      schema: { fields: FIELDS },
      deadLetter: { file: path.join(work, 'dlq.jsonl') },
    }),
  );
  const lanceDir = path.join(work, 'data', 'lance');
  const replica = new ReplicaProcess(file, path.join(work, 'data'), brokers, threadTaggedEnv(tagDir), {
    logLevel: 'warn',
  });
  const sampler = new ProcessTreeSampler(replica.pid, tagDir).start();
  try {
    for (;;) {
      const rows = await countRows(lanceDir);
      if (rows >= RECORDS) break;
      if (!replica.alive) {
        const { code } = await replica.exited;
        throw new Error(`the replica exited (${code}) at ${rows} rows:\n${replica.tail()}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    const seconds = sampler.elapsed();
    await sampler.sampleOnce();
    const result = {
      records: RECORDS,
      mib: bytes / MiB,
      seconds,
      cpuSeconds: sampler.cpuSeconds(),
      threads: await sampler.threadCpu(),
    };
    return result;
  } finally {
    await replica.kill('SIGTERM');
    sampler.stop();
    await fsp.rm(work, { recursive: true, force: true });
    const cleanup = kafkaClient(brokers).admin();
    await cleanup.connect();
    await cleanup.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await cleanup.disconnect();
  }
}

async function countRows(uri: string): Promise<number> {
  try {
    const db = await lancedb.connect(uri, { readConsistencyInterval: 0 });
    try {
      if (!(await db.tableNames()).includes('vectors')) return 0;
      const t = await db.openTable('vectors');
      const n = await t.countRows();
      t.close();
      return n;
    } finally {
      db.close();
    }
  } catch {
    return 0;
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
    `Generated by \`node dist/bench/vector-throughput.js --records ${RECORDS}\` on ${new Date().toISOString()} (${os.cpus().length} cores, Node ${process.version}).`,
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
  const broker = ensureBroker((l) => console.error(l));
  try {
    const rows: string[] = [];
    const threadRows = new Map<string, Record<Encoding, number>>();
    for (const e of ENCODINGS) {
      const r = await endToEnd(broker.brokers, e);
      const gib = r.mib / 1024;
      rows.push(
        `| ${e} | ${r.records.toLocaleString('en-US')} | ${r.mib.toFixed(0)} | ${r.seconds.toFixed(1)} | ${(r.mib / r.seconds).toFixed(1)} | ${Math.round(r.records / r.seconds).toLocaleString('en-US')} | ${r.cpuSeconds.toFixed(1)} | ${(r.cpuSeconds / gib).toFixed(1)} |`,
      );
      for (const [thread, cpu] of Object.entries(r.threads)) {
        const row = threadRows.get(thread) ?? { json: 0, base64: 0 };
        row[e] = cpu / gib;
        threadRows.set(thread, row);
      }
    }
    out('');
    out('End to end (one replica, defaults, no index; timed from spawn to the last row in Lance):');
    out('');
    out('| encoding | records | MiB | s | MiB/s | records/s | CPU s | CPU s / GiB |');
    out('| --- | --- | --- | --- | --- | --- | --- | --- |');
    for (const r of rows) out(r);
    out('');
    out('CPU seconds per GiB of messages, per thread of the replica:');
    out('');
    out('| thread | json | base64 |');
    out('| --- | --- | --- |');
    for (const [thread, v] of [...threadRows.entries()].sort(([a], [b]) => a.localeCompare(b)))
      out(`| ${thread} | ${v.json.toFixed(1)} | ${v.base64.toFixed(1)} |`);
  } finally {
    broker.stop();
  }
  await fsp.writeFile(path.join(REPO, 'bench', 'vectors.md'), `${lines.join('\n')}\n`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
