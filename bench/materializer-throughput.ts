/**
 * Materializer: buffered vs streamed preparation, measured side by side on the same
 * staged backlog. Stages a backlog of ~1 KiB log rows (default 10× the publication
 * bound), copies it once per arm, and publishes each copy into its own Lance table
 * in a child process, sampling that process's RSS.
 *
 *   npm run build && node dist/bench/materializer-throughput.js [--backlog-mib 640] [--publication-mib 64]
 */
import { spawn } from 'node:child_process';
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
} from 'apache-arrow';
import { silentLogger } from '../src/common/logger';
import { recordOffset, tpKey } from '../src/common/offsets';
import { Materializer } from '../src/materializer/materializer';
import { FileLocks, TableStaging, minuteKeyOf } from '../src/staging';
import { benchArgs } from './args';

const args = benchArgs();
const BACKLOG = Number(args.get('backlog-mib') ?? 640) * 1024 * 1024;
const PUBLICATION = Number(args.get('publication-mib') ?? 64) * 1024 * 1024;
const PARTITIONS = 6;
const ROWS = 2_000;
const TOPIC = 'bench';

async function stage(tableDir: string): Promise<number> {
  const schema = new Schema([
    new Field('_topic', new Utf8(), false),
    new Field('_partition', new Int32(), false),
    new Field('_offset', new Int64(), false),
    new Field('_timestamp', new Timestamp(TimeUnit.MILLISECOND), false),
    new Field('level', new Utf8(), true),
    new Field('latency_ms', new Float64(), true),
    new Field('message', new Utf8(), true),
  ]);
  const staging = await TableStaging.open({
    tableDir,
    table: 'logs',
    locks: new FileLocks(),
    owner: 'bench',
    logger: silentLogger(),
    maxPartBytes: 16 * 1024 * 1024,
    maxPartAgeMs: 1 << 30,
    epoch: { owner: 'A', epoch: 1 },
  });
  const text = (i: number) =>
    `request ${i} handled upstream cache miss retry `.repeat(22).slice(0, 950) + Math.random();
  let bytes = 0;
  let offset = 0;
  while (bytes < BACKLOG) {
    for (let p = 0; p < PARTITIONS; p++) {
      const ids = Array.from({ length: ROWS }, (_, i) => offset + i);
      const children = [
        vectorFromArray(
          ids.map(() => TOPIC),
          new Utf8(),
        ).data[0]!,
        vectorFromArray(
          ids.map(() => p),
          new Int32(),
        ).data[0]!,
        vectorFromArray(
          ids.map((i) => BigInt(i)),
          new Int64(),
        ).data[0]!,
        vectorFromArray(
          ids.map((i) => 1_796_000_000_000 + i),
          new Timestamp(TimeUnit.MILLISECOND),
        ).data[0]!,
        vectorFromArray(
          ids.map((i) => ['info', 'warn', 'error'][i % 3]),
          new Utf8(),
        ).data[0]!,
        vectorFromArray(
          ids.map((i) => (i * 1.37) % 1000),
          new Float64(),
        ).data[0]!,
        vectorFromArray(ids.map(text), new Utf8()).data[0]!,
      ];
      const batch = new RecordBatch(
        schema,
        makeData({ type: new Struct(schema.fields), length: ROWS, nullCount: 0, children }),
      );
      bytes += batch.data.byteLength;
      staging.push({
        topic: TOPIC,
        partition: p,
        batch,
        minute: minuteKeyOf(Date.now()),
        handledThrough: recordOffset(offset + ROWS - 1),
      });
    }
    offset += ROWS;
    await staging.sync();
  }
  await staging.close();
  return offset;
}

async function child(
  mode: 'buffered' | 'streamed',
  tableDir: string,
  lanceDir: string,
  committed: number,
): Promise<void> {
  const m = await Materializer.open({
    tableDir,
    lance: { uri: lanceDir, table: 'logs' },
    owner: 'bench',
    mode,
    maxPublicationBytes: PUBLICATION,
    maxPublicationDelayMs: 0,
    fetchPermits: 2,
    decodePermits: 2,
    sourceReservationBytes: 4 * PUBLICATION,
    logger: silentLogger(),
  });
  m.setOwnership(
    new Map(
      Array.from({ length: PARTITIONS }, (_, p) => [
        tpKey(TOPIC, p),
        { chain: [{ owner: 'A', epoch: 1, start: 0 }], committed },
      ]),
    ),
  );
  const t0 = performance.now();
  const results = await m.runOnce();
  const seconds = (performance.now() - t0) / 1000;
  const rows = await m.lance.totalRows();
  m.close();
  process.stdout.write(
    JSON.stringify({
      seconds,
      rows,
      publications: results.length,
      sourceWaitSeconds: results.reduce((s, r) => s + r.sourceWaitSeconds, 0),
    }),
  );
}

async function main(): Promise<void> {
  if (args.has('child')) {
    const [tableDir, lanceDir, committed] = [
      args.get('table-dir')!,
      args.get('lance-dir')!,
      Number(args.get('committed')),
    ];
    return child(args.get('child') as 'buffered' | 'streamed', tableDir, lanceDir, committed);
  }
  const work = await fsp.mkdtemp(path.join(os.tmpdir(), 'kl-bench-mat-'));
  const source = path.join(work, 'source');
  const perPartition = await stage(source);
  const stagedBytes = (await fsp.readdir(source)).length
    ? (await Promise.all((await fsp.readdir(source)).map((n) => fsp.stat(path.join(source, n))))).reduce(
        (n, s) => n + (s.isFile() ? s.size : 0),
        0,
      )
    : 0;
  const arms: Record<string, unknown>[] = [];
  for (const mode of ['buffered', 'streamed', 'buffered', 'streamed'] as const) {
    const tableDir = path.join(work, `${mode}-${arms.length}`);
    await fsp.cp(source, tableDir, { recursive: true });
    const lanceDir = path.join(work, `lance-${arms.length}`);
    const proc = spawn(
      process.execPath,
      [
        __filename,
        '--child',
        mode,
        '--table-dir',
        tableDir,
        '--lance-dir',
        lanceDir,
        '--committed',
        String(perPartition),
        '--publication-mib',
        String(PUBLICATION / 1024 / 1024),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    let peak = 0;
    proc.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    const timer = setInterval(() => {
      void fsp
        .readFile(`/proc/${proc.pid}/status`, 'utf8')
        .then((s) => (peak = Math.max(peak, Number(/VmRSS:\s+(\d+)/.exec(s)?.[1] ?? 0) * 1024)))
        .catch(() => undefined);
    }, 50);
    await new Promise((r) => proc.on('exit', r));
    clearInterval(timer);
    const r = JSON.parse(out) as {
      seconds: number;
      rows: number;
      publications: number;
      sourceWaitSeconds: number;
    };
    arms.push({
      mode,
      rows: r.rows,
      publications: r.publications,
      seconds: Number(r.seconds.toFixed(2)),
      mibPerSecond: Number((stagedBytes / 1024 / 1024 / r.seconds).toFixed(1)),
      rowsPerSecond: Math.round(r.rows / r.seconds),
      sourceWaitSeconds: Number(r.sourceWaitSeconds.toFixed(2)),
      peakRssMiB: Math.round(peak / 1024 / 1024),
    });
    await fsp.rm(lanceDir, { recursive: true, force: true });
    await fsp.rm(tableDir, { recursive: true, force: true });
  }
  await fsp.rm(work, { recursive: true, force: true });
  console.log(
    JSON.stringify(
      {
        backlogMiB: Math.round(stagedBytes / 1024 / 1024),
        publicationBoundMiB: PUBLICATION / 1024 / 1024,
        rows: perPartition * PARTITIONS,
        arms,
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
