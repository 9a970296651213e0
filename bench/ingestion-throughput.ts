/**
 * Ingestion throughput: records from the broker to durable, committed staging.
 * Produces N JSON log records of ~1 KiB over 6 partitions, then runs one replica
 * (`bin/kafka-lance run`, 2 staging workers, 1 s durability tick) and times from its
 * group join until the committed offsets reach the log end.
 *
 *   npm run kafka:start
 *   npm run build && node dist/bench/ingestion-throughput.js [--records 300000] [--cpu-prof DIR]
 *
 * Brokers: KAFKA_BOOTSTRAP_SERVERS (default 127.0.0.1:9092). The broker shares the
 * machine's cores with the replica, as in every run here.
 */
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Kafka, Partitioners, logLevel } from 'kafkajs';
import { benchArgs } from './args';
import { ReplicaProcess } from '../src/harness/replica-process';

const args = benchArgs();
const RECORDS = Number(args.get('records') ?? 300_000);
const PARTITIONS = 6;
const brokers = (process.env.KAFKA_BOOTSTRAP_SERVERS ?? process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(
  ',',
);

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
  base.message = filler.repeat(Math.ceil(800 / filler.length)).slice(0, 800);
  return JSON.stringify(base);
}

async function main(): Promise<void> {
  const kafka = new Kafka({ clientId: 'bench', brokers, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const topic = `bench-ingest-${Date.now()}`;
  await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS }], waitForLeaders: true });
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  let bytes = 0;
  const t0 = performance.now();
  for (let start = 0; start < RECORDS; start += 6_000) {
    await Promise.all(
      Array.from({ length: PARTITIONS }, (_, p) => {
        const values: string[] = [];
        for (let n = start + p; n < Math.min(RECORDS, start + 6_000); n += PARTITIONS) values.push(record(n));
        for (const v of values) bytes += Buffer.byteLength(v);
        return producer.send({ topic, acks: -1, messages: values.map((value) => ({ partition: p, value })) });
      }),
    );
  }
  await producer.disconnect();
  const produceSeconds = (performance.now() - t0) / 1000;

  const work = await fsp.mkdtemp(path.join(os.tmpdir(), 'kl-bench-ingest-'));
  const name = `bench${Date.now()}`;
  const definition = {
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
    durabilityIntervalMs: 1000,
    workers: 2,
    ...(args.has('queue-mib') ? { queue: { maxBytes: Number(args.get('queue-mib')) * 1024 * 1024 } } : {}),
  };
  const file = path.join(work, 'consumer.json');
  await fsp.writeFile(file, JSON.stringify(definition));
  let joinedAt = 0;
  let peakRss = 0;
  const replica = new ReplicaProcess(
    file,
    work,
    brokers,
    {},
    {
      // --cpu-prof DIR: a V8 CPU profile of every thread of the replica (not allowed in NODE_OPTIONS).
      nodeArgs: args.has('cpu-prof')
        ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(args.get('cpu-prof')!)}`]
        : [],
      onLine: (line) => {
        if (!joinedAt && line.event === 'kafka.join') joinedAt = performance.now();
      },
    },
  );
  const rssTimer = setInterval(() => {
    void fsp
      .readFile(`/proc/${replica.pid}/status`, 'utf8')
      .then((s) => (peakRss = Math.max(peakRss, Number(/VmRSS:\s+(\d+)/.exec(s)?.[1] ?? 0) * 1024)))
      .catch(() => undefined);
  }, 200);
  const groupId = `kafka-lance-${name}`;
  for (;;) {
    const ends = await admin.fetchTopicOffsets(topic);
    const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
    const at = new Map(committed!.partitions.map((p) => [p.partition, p.offset]));
    if (joinedAt && ends.every((e) => at.get(e.partition) === e.high)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const seconds = (performance.now() - joinedAt) / 1000;
  clearInterval(rssTimer);
  await replica.kill('SIGTERM');
  await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
  await admin.disconnect();
  await fsp.rm(work, { recursive: true, force: true });
  const mib = bytes / 1024 / 1024;
  console.log(
    JSON.stringify(
      {
        records: RECORDS,
        partitions: PARTITIONS,
        recordBytes: Math.round(bytes / RECORDS),
        produceSeconds: Number(produceSeconds.toFixed(2)),
        ingestSeconds: Number(seconds.toFixed(2)),
        recordsPerSecond: Math.round(RECORDS / seconds),
        mibPerSecond: Number((mib / seconds).toFixed(1)),
        replicaPeakRssMiB: Math.round(peakRss / 1024 / 1024),
      },
      null,
      2,
    ),
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
