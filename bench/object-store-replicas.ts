/**
 * Replicas into one Lance table on an S3 API server with conditional writes (s3proxy
 * 4.0.0 from deploy/s3-local), side by side with a local directory, in one run on one
 * broker and one pre-produced topic of bench log records (6 partitions):
 *
 * - throughput: one replica into a local directory, one into S3, three (one group) into
 *   one S3 table; timed from the first spawn until every record is a row, rows checked
 *   exactly once by (partition, offset);
 * - freshness: one replica while `produce` writes `--rate` records/s for `--seconds`, into
 *   a local directory and into S3 (seen time − Kafka timestamp per row, p50 / p99).
 *
 *   npm run build && node dist/bench/object-store-replicas.js [--records 200000] [--rate 2000] [--seconds 20]
 *
 * Writes bench/object-store-replicas.md. Brokers: KAFKA_BOOTSTRAP_SERVERS, else a local
 * broker (deploy/kafka-local) started and stopped here; s3proxy on S3_BENCH_PORT (19960).
 */
import { execFileSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ulid } from 'ulid';
import { benchArgs } from './args';
import { ensureBroker, produceDataset } from './lib/kafka';
import {
  measureFreshness,
  openTable,
  runReplicaArm,
  startReplica,
  stopReplica,
  verifyTable,
  type Freshness,
} from './lib/replica-arm';
import { MiB } from './lib/result';

const REPO = path.resolve(__dirname, '../..');
const args = benchArgs();
const RECORDS = Number(args.get('records') ?? 200_000);
const RATE = Number(args.get('rate') ?? 2_000);
const SECONDS = Number(args.get('seconds') ?? 20);
const PARTITIONS = 6;
const S3_PORT = Number(process.env.S3_BENCH_PORT ?? 19960);
const S3_SCRIPT = path.join(REPO, 'deploy/s3-local/s3-local');
const storageOptions = {
  endpoint: `http://127.0.0.1:${S3_PORT}`,
  aws_access_key_id: process.env.S3_LOCAL_ACCESS_KEY_ID ?? 'kafka-lance',
  aws_secret_access_key: process.env.S3_LOCAL_SECRET_ACCESS_KEY ?? 'kafka-lance-secret',
  region: 'us-east-1',
  allow_http: 'true',
};
const onS3 = () => ({
  lance: { uri: `s3://kafka-lance/bench-${ulid().toLowerCase()}`, storageOptions },
});

const t0 = Date.now();
const log = (line: string) =>
  process.stderr.write(`[bench ${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${line}\n`);
const s3 = (command: 'start' | 'stop') =>
  execFileSync(S3_SCRIPT, [command], {
    env: { ...process.env, S3_LOCAL_PORT: String(S3_PORT), S3_LOCAL_VERSION: '4.0.0' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });

interface Throughput {
  readonly arm: string;
  readonly seconds: number;
  readonly rows: number;
  readonly distinct: number;
  readonly problems: readonly string[];
}

/** `replicas` replicas in one group into one S3 table, from the first spawn to the last row. */
async function severalOnS3(brokers: readonly string[], topic: string, replicas: number): Promise<Throughput> {
  const extra = { ...onS3(), name: `bench-s3-${replicas}-${Date.now()}` };
  const started = performance.now();
  const running = await Promise.all(
    Array.from({ length: replicas }, (_, i) => startReplica(`s3-${i}`, topic, brokers, extra)),
  );
  const problems: string[] = [];
  let visible = 0;
  let lastChange = performance.now();
  while (visible < RECORDS) {
    await new Promise((r) => setTimeout(r, 500));
    if (running.some((r) => r.exited)) {
      problems.push('a replica exited before every row was visible');
      break;
    }
    const table = await openTable(extra.lance.uri, storageOptions);
    const now = table ? await table.countRows().catch(() => visible) : 0;
    table?.close();
    if (now !== visible) lastChange = performance.now();
    visible = now;
    if (performance.now() - lastChange > 120_000) {
      problems.push(`stalled at ${visible} of ${RECORDS} rows`);
      break;
    }
  }
  const seconds = (performance.now() - started) / 1000;
  for (const r of running) await stopReplica(r);
  const check = await verifyTable(extra.lance.uri, storageOptions);
  for (const r of running) await fsp.rm(r.work, { recursive: true, force: true });
  return {
    arm: `${replicas} replicas, one S3 table`,
    seconds,
    rows: check.rows,
    distinct: check.distinct,
    problems,
  };
}

async function main(): Promise<void> {
  const broker = ensureBroker(log);
  s3('start');
  try {
    const data = await produceDataset(broker.brokers, `bench-s3-${RECORDS}`, RECORDS, PARTITIONS, log);
    const results: Throughput[] = [];
    for (const [id, label, extra] of [
      ['local-1', '1 replica, local directory', {}],
      ['s3-1', '1 replica, S3', onS3()],
    ] as const) {
      log(`arm ${label}`);
      const r = await runReplicaArm(
        {
          id,
          label,
          topic: data.topic,
          records: RECORDS,
          bytes: data.bytes,
          brokers: broker.brokers,
          extra,
        },
        log,
      );
      results.push({
        arm: label,
        seconds: r.wallSeconds ?? r.seconds,
        rows: r.verifiedRows ?? r.rows,
        distinct: r.verifiedRows ?? r.rows, // runReplicaArm names any duplicate in problems
        problems: r.problems,
      });
    }
    log('arm 3 replicas, one S3 table');
    results.push(await severalOnS3(broker.brokers, data.topic, 3));
    const freshness: [string, Freshness][] = [];
    for (const [id, extra] of [
      ['local directory', {}],
      ['S3 (s3proxy 4.0.0)', onS3()],
    ] as const) {
      log(`freshness ${id}`);
      freshness.push([id, await measureFreshness(broker.brokers, PARTITIONS, RATE, SECONDS, log, extra)]);
    }
    const mib = data.bytes / MiB;
    const lines = [
      '# Replicas into one Lance table on S3 with conditional writes',
      '',
      `Generated by \`node dist/bench/object-store-replicas.js --records ${RECORDS} --rate ${RATE} --seconds ${SECONDS}\` on ${new Date().toISOString()} (${os.cpus().length} cores shared with the broker and s3proxy, Node ${process.version}); ${RECORDS.toLocaleString('en-US')} records, ${mib.toFixed(0)} MiB, ${PARTITIONS} partitions.`,
      '',
      '| arm | seconds (spawn → last row) | MiB/s | rows | distinct (partition, offset) | problems |',
      '| --- | --- | --- | --- | --- | --- |',
      ...results.map(
        (r) =>
          `| ${r.arm} | ${r.seconds.toFixed(1)} | ${(mib / r.seconds).toFixed(1)} | ${r.rows} | ${r.distinct} | ${r.problems.join('; ') || 'none'} |`,
      ),
      '',
      `Freshness at ${RATE} records/s for ${SECONDS} s (seen in Lance − Kafka timestamp, per row):`,
      '',
      '| store | rows visible | p50 s | p99 s | max s | problems |',
      '| --- | --- | --- | --- | --- | --- |',
      ...freshness.map(
        ([id, f]) =>
          `| ${id} | ${f.visibleRows} / ${f.rows} | ${f.p50Seconds} | ${f.p99Seconds} | ${f.maxSeconds} | ${f.problems.join('; ') || 'none'} |`,
      ),
      '',
    ];
    await fsp.writeFile(path.join(REPO, 'bench', 'object-store-replicas.md'), lines.join('\n'));
    process.stdout.write(lines.join('\n'));
  } finally {
    s3('stop');
    broker.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
