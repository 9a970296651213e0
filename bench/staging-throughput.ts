/**
 * Staging throughput: Arrow rows appended to part files and fsynced at a fixed
 * durability tick, the way a staging worker runs. ~1 KiB log rows, 6 partitions,
 * batches of 500 rows (one Kafka fetch), a sync every tick and a flush after it.
 *
 *   npm run build && node dist/bench/staging-throughput.js [--seconds 20] [--tick-ms 1000]
 *
 * Decoding is not measured here (see the ingestion bench): the rows are built once
 * and only their offsets change, so this is the cost of staging itself. `cpuSecondsPerGiB`
 * is the process's CPU time (all threads, process.cpuUsage) per GiB staged.
 *
 * Then the part checksum alone, one pass over every staged file, sha256 (before) and
 * CRC32C (now) in alternating rounds: a part written and published by one replica costs
 * two passes either way (writer, preparation); one cataloged from the directory cost
 * three sha256 passes (trailer, whole-file checksum, preparation) and costs two CRC32C.
 */
import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  Field,
  Float64,
  Int32,
  Int64,
  RecordBatch,
  Schema,
  Struct,
  TimeUnit,
  Timestamp,
  Utf8,
  makeData,
  vectorFromArray,
  type Data,
  type DataType,
} from 'apache-arrow';
import { crc32c } from '@node-rs/crc32';
import { ulid } from 'ulid';
import { silentLogger } from '../src/common/logger';
import { recordOffset } from '../src/common/offsets';
import { FileLocks, TableStaging, minuteKeyOf } from '../src/staging';
import { benchArgs } from './args';

const args = benchArgs();
const SECONDS = Number(args.get('seconds') ?? 20);
const TICK_MS = Number(args.get('tick-ms') ?? 1000);
const PARTITIONS = 6;
const BATCH_ROWS = 500;
const TOPIC = 'bench-logs';

const schema = new Schema([
  new Field('_topic', new Utf8(), false),
  new Field('_partition', new Int32(), false),
  new Field('_offset', new Int64(), false),
  new Field('_timestamp', new Timestamp(TimeUnit.MILLISECOND), false),
  new Field('level', new Utf8(), true),
  new Field('service', new Utf8(), true),
  new Field('host', new Utf8(), true),
  new Field('status', new Int32(), true),
  new Field('latency_ms', new Float64(), true),
  new Field('message', new Utf8(), true),
]);

const col = (values: unknown[], type: DataType): Data => vectorFromArray(values, type).data[0]!;
const words = 'request handled upstream timeout retry cache miss user order payment shard replica'.split(' ');
function text(seed: number, length: number): string {
  let s = '';
  let x = seed;
  while (s.length < length) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    s += `${words[x % words.length]} ${x % 100000} `;
  }
  return s.slice(0, length);
}

/** Payload columns for one batch, shared by every push of a partition (only offsets change). */
function payload(partition: number): Data[] {
  const rows = Array.from({ length: BATCH_ROWS }, (_, i) => i);
  return [
    col(
      rows.map(() => TOPIC),
      new Utf8(),
    ),
    col(
      rows.map(() => partition),
      new Int32(),
    ),
    col(
      rows.map((i) => ['info', 'warn', 'error', 'debug'][i % 4]),
      new Utf8(),
    ),
    col(
      rows.map((i) => `svc-${i % 17}`),
      new Utf8(),
    ),
    col(
      rows.map((i) => `host-${(i * 7) % 64}.eu-west-1.internal`),
      new Utf8(),
    ),
    col(
      rows.map((i) => [200, 201, 404, 500][i % 4]),
      new Int32(),
    ),
    col(
      rows.map((i) => (i * 13.37) % 1000),
      new Float64(),
    ),
    col(
      rows.map((i) => text(partition * 100_000 + i, 900)),
      new Utf8(),
    ),
  ];
}

function batchAt(fixed: Data[], firstOffset: number, now: number): RecordBatch {
  const offsets = new BigInt64Array(BATCH_ROWS);
  const times = new BigInt64Array(BATCH_ROWS);
  for (let i = 0; i < BATCH_ROWS; i++) {
    offsets[i] = BigInt(firstOffset + i);
    times[i] = BigInt(now);
  }
  const [topic, partition, ...rest] = fixed;
  const children = [
    topic!,
    partition!,
    makeData({ type: new Int64(), length: BATCH_ROWS, nullCount: 0, data: offsets }),
    makeData({ type: new Timestamp(TimeUnit.MILLISECOND), length: BATCH_ROWS, nullCount: 0, data: times }),
    ...rest,
  ];
  return new RecordBatch(
    schema,
    makeData({ type: new Struct(schema.fields), length: BATCH_ROWS, nullCount: 0, children }),
  );
}

async function main(): Promise<void> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'kl-bench-staging-'));
  const staging = await TableStaging.open({
    tableDir: dir,
    table: 'bench',
    locks: new FileLocks(),
    owner: 'bench',
    logger: silentLogger(),
    maxPartBytes: 64 * 1024 * 1024,
    maxPartAgeMs: 5_000,
    epoch: { owner: ulid(), epoch: 1 },
  });
  const fixed = Array.from({ length: PARTITIONS }, (_, p) => payload(p));
  const next = new Array<number>(PARTITIONS).fill(0);
  const batchBytes = batchAt(fixed[0]!, 0, Date.now()).data.byteLength;

  const started = performance.now();
  const cpuStart = process.cpuUsage();
  const deadline = started + SECONDS * 1000;
  let rows = 0;
  let ticks = 0;
  let syncMs = 0;
  let maxSyncMs = 0;
  let nextTick = started + TICK_MS;
  // Push as fast as the event loop allows between ticks; at each tick, sync then flush due parts.
  while (performance.now() < deadline) {
    for (let p = 0; p < PARTITIONS; p++) {
      const now = Date.now();
      staging.push({
        topic: TOPIC,
        partition: p,
        batch: batchAt(fixed[p]!, next[p]!, now),
        minute: minuteKeyOf(now),
        handledThrough: recordOffset(next[p]! + BATCH_ROWS - 1),
      });
      next[p]! += BATCH_ROWS;
      rows += BATCH_ROWS;
    }
    // Bound the buffer like the worker's bounded queue would: sync early once 64 MiB wait.
    if (performance.now() >= nextTick || staging.stats().bufferedBytes > 64 * 1024 * 1024) {
      const t0 = performance.now();
      await staging.sync();
      await staging.flush();
      const dt = performance.now() - t0;
      syncMs += dt;
      maxSyncMs = Math.max(maxSyncMs, dt);
      ticks += 1;
      nextTick = performance.now() + TICK_MS;
    }
  }
  await staging.sync();
  await staging.close();
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuStart);
  const stagedBytes = (await fsp.readdir(dir)).length
    ? (await Promise.all((await fsp.readdir(dir)).map((n) => fsp.stat(path.join(dir, n))))).reduce(
        (n, s) => n + (s.isFile() ? s.size : 0),
        0,
      )
    : 0;
  const checksum = await checksumPassCost(dir);
  await fsp.rm(dir, { recursive: true, force: true });
  const mib = stagedBytes / 1024 / 1024;
  const result = {
    seconds: Number(seconds.toFixed(2)),
    tickMs: TICK_MS,
    partitions: PARTITIONS,
    rows,
    rowBytes: Math.round(batchBytes / BATCH_ROWS),
    stagedMiB: Number(mib.toFixed(1)),
    rowsPerSecond: Math.round(rows / seconds),
    mibPerSecond: Number((mib / seconds).toFixed(1)),
    ticks,
    meanTickSyncMs: Number((syncMs / Math.max(1, ticks)).toFixed(1)),
    maxTickSyncMs: Number(maxSyncMs.toFixed(1)),
    cpuSecondsPerGiB: Number((((cpu.user + cpu.system) / 1e6) * (1024 / mib)).toFixed(2)),
    checksumOnePassCpuSecondsPerGiB: checksum,
  };
  console.log(JSON.stringify(result, null, 2));
}

/** CPU seconds per GiB of one checksum pass over the staged files, median of 5 rounds each. */
async function checksumPassCost(dir: string): Promise<{ sha256: number; crc32c: number }> {
  const names = (await fsp.readdir(dir)).filter((n) => n.endsWith('.arrows') || n.endsWith('.part'));
  const files = await Promise.all(names.map((n) => fsp.readFile(path.join(dir, n))));
  const gib = files.reduce((n, f) => n + f.byteLength, 0) / 1024 ** 3;
  const ways = {
    sha256: (b: Uint8Array) => createHash('sha256').update(b).digest('hex'),
    crc32c: (b: Uint8Array) => crc32c(b),
  };
  const seconds: Record<keyof typeof ways, number[]> = { sha256: [], crc32c: [] };
  for (let round = 0; round < 10; round++) {
    const way = round % 2 === 0 ? 'sha256' : 'crc32c';
    const start = process.cpuUsage();
    for (const f of files) ways[way](f);
    const used = process.cpuUsage(start);
    seconds[way].push((used.user + used.system) / 1e6);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  return {
    sha256: Number((median(seconds.sha256) / gib).toFixed(3)),
    crc32c: Number((median(seconds.crc32c) / gib).toFixed(3)),
  };
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
