/**
 * Publication of many tables by one materializer (the table set the worker runs): the same
 * records staged into one table, then spread over N tables (3 partitions each, as a
 * pattern of N topics routed per topic would stage them), each published in a child
 * process whose RSS is sampled. Measures the publication half of issue "many topics,
 * many tables": MiB/s of staged bytes, peak RSS, and the ratio of N tables to one.
 *
 *   npm run build && node dist/bench/many-tables-publication.js [--records 1000000] [--tables 200] [--turns 4]
 */
import { spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  Field,
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
import { Materializer, sharedBudgets } from '../src/materializer/materializer';
import { TableSet } from '../src/materializer/table-set';
import { FileLocks, TableStaging, minuteKeyOf } from '../src/staging';
import { benchArgs } from './args';

const args = benchArgs();
const RECORDS = Number(args.get('records') ?? 1_000_000);
const TABLES = Number(args.get('tables') ?? 200);
/** Tables' turns at once (the worker's materializer.tablesInFlight). */
const TURNS = Number(args.get('turns') ?? 4);
const PARTITIONS = 3;
const BATCH = 2_000;
const MiB = 1024 * 1024;

const schema = new Schema([
  new Field('_topic', new Utf8(), false),
  new Field('_partition', new Int32(), false),
  new Field('_offset', new Int64(), false),
  new Field('_timestamp', new Timestamp(TimeUnit.MILLISECOND), false),
  new Field('level', new Utf8(), true),
  new Field('message', new Utf8(), true),
]);

function batchOf(topic: string, partition: number, from: number, rows: number): RecordBatch {
  const ids = Array.from({ length: rows }, (_, i) => from + i);
  const children = [
    vectorFromArray(
      ids.map(() => topic),
      new Utf8(),
    ).data[0]!,
    vectorFromArray(
      ids.map(() => partition),
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
      ids.map((i) => `request ${i} handled upstream cache miss retry `.repeat(5)),
      new Utf8(),
    ).data[0]!,
  ];
  return new RecordBatch(
    schema,
    makeData({ type: new Struct(schema.fields), length: rows, nullCount: 0, children }),
  );
}

/** Stages `records` rows of topic `topic` into `tableDir`, spread over the partitions; returns rows per partition. */
async function stage(tableDir: string, topic: string, records: number): Promise<number> {
  const staging = await TableStaging.open({
    tableDir,
    table: path.basename(tableDir),
    locks: new FileLocks(),
    owner: 'bench',
    logger: silentLogger(),
    maxPartBytes: 16 * MiB,
    maxPartAgeMs: 1 << 30,
    epoch: { owner: 'A', epoch: 1 },
  });
  const perPartition = Math.ceil(records / PARTITIONS);
  for (let from = 0; from < perPartition; from += BATCH) {
    const rows = Math.min(BATCH, perPartition - from);
    for (let p = 0; p < PARTITIONS; p++)
      staging.push({
        topic,
        partition: p,
        batch: batchOf(topic, p, from, rows),
        minute: minuteKeyOf(Date.now()),
        handledThrough: recordOffset(from + rows - 1),
      });
    await staging.sync();
  }
  await staging.close();
  return perPartition;
}

async function child(
  stagingRoot: string,
  again: string,
  lanceDir: string,
  tables: number,
  perPartition: number,
): Promise<void> {
  const budgets = sharedBudgets({ fetchPermits: 2, decodePermits: 2, sourceReservationBytes: 128 * MiB });
  const opened: Materializer[] = [];
  const set = new TableSet({
    stagingRoot,
    logger: silentLogger(),
    optimizeEveryMs: 0,
    attemptsPerTurn: 1,
    turnsInFlight: TURNS,
    open: async (table, tableDir) => {
      const m = await Materializer.open({
        tableDir,
        lance: { uri: lanceDir, table },
        owner: 'bench',
        mode: 'buffered',
        maxPublicationBytes: 32 * MiB,
        maxPublicationDelayMs: 0,
        fetchPermits: 2,
        decodePermits: 2,
        sourceReservationBytes: 128 * MiB,
        logger: silentLogger(),
        shared: budgets,
      });
      opened.push(m);
      return m;
    },
  });
  const ownership = new Map();
  for (let t = 0; t < tables; t++)
    for (let p = 0; p < PARTITIONS; p++)
      ownership.set(tpKey(topicOf(t, tables), p), {
        chain: [{ owner: 'A', epoch: 1, start: 0 }],
        committed: perPartition,
      });
  set.setOwnership(ownership);
  await set.discover();
  const publishAll = async () => {
    const t0 = performance.now();
    let rounds = 1;
    while (await set.round()) rounds++;
    return { seconds: (performance.now() - t0) / 1000, rounds };
  };
  // Cold: every table's first publication creates it (and its system-column indexes).
  const cold = await publishAll();
  // Warm: the same records staged again into the tables that now exist (steady state).
  await fsp.cp(again, stagingRoot, { recursive: true });
  const warm = await publishAll();
  let rows = 0;
  for (const m of opened) {
    rows += await m.lance.totalRows();
    m.close();
  }
  process.stdout.write(JSON.stringify({ cold, warm, rows }));
}

const topicOf = (t: number, tables: number) =>
  tables === 1 ? 'events' : `events.t${String(t).padStart(3, '0')}`;

async function dirBytes(dir: string): Promise<number> {
  let bytes = 0;
  for (const e of await fsp.readdir(dir, { withFileTypes: true, recursive: true }))
    if (e.isFile()) bytes += (await fsp.stat(path.join(e.parentPath, e.name))).size;
  return bytes;
}

async function arm(work: string, tables: number) {
  const stagingRoot = path.join(work, `staging-${tables}`);
  const lanceDir = path.join(work, `lance-${tables}`);
  let perPartition = 0;
  for (let t = 0; t < tables; t++) {
    const table = tables === 1 ? 'events' : `events_t${String(t).padStart(3, '0')}`;
    perPartition = await stage(
      path.join(stagingRoot, table),
      topicOf(t, tables),
      Math.ceil(RECORDS / tables),
    );
  }
  const stagedBytes = await dirBytes(stagingRoot);
  const again = path.join(work, `again-${tables}`);
  await fsp.cp(stagingRoot, again, { recursive: true });
  const proc = spawn(
    process.execPath,
    [
      __filename,
      '--child',
      String(tables),
      '--staging-root',
      stagingRoot,
      '--again',
      again,
      '--lance-dir',
      lanceDir,
      '--per-partition',
      String(perPartition),
      '--turns',
      String(TURNS),
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
  type Pass = { seconds: number; rounds: number };
  const r = JSON.parse(out) as { cold: Pass; warm: Pass; rows: number };
  for (const d of [stagingRoot, again, lanceDir]) await fsp.rm(d, { recursive: true, force: true });
  const pass = (p: Pass) => ({
    seconds: Number(p.seconds.toFixed(2)),
    mibPerSecond: Number((stagedBytes / MiB / p.seconds).toFixed(2)),
    rowsPerSecond: Math.round(r.rows / 2 / p.seconds),
    rounds: p.rounds,
  });
  return {
    tables,
    rowsPerPass: r.rows / 2,
    stagedMiBPerPass: Number((stagedBytes / MiB).toFixed(1)),
    cold: pass(r.cold),
    warm: pass(r.warm),
    peakRssMiB: Math.round(peak / MiB),
  };
}

async function main(): Promise<void> {
  if (args.has('child')) {
    return child(
      args.get('staging-root')!,
      args.get('again')!,
      args.get('lance-dir')!,
      Number(args.get('child')),
      Number(args.get('per-partition')),
    );
  }
  const work = await fsp.mkdtemp(path.join(os.tmpdir(), 'kl-bench-tables-'));
  try {
    const one = await arm(work, 1);
    const many = await arm(work, TABLES);
    console.log(
      JSON.stringify(
        {
          records: RECORDS,
          turnsInFlight: TURNS,
          arms: [one, many],
          // N tables' MiB/s over one table's, for the first publications and in steady state.
          ratio: {
            cold: Number((many.cold.mibPerSecond / one.cold.mibPerSecond).toFixed(2)),
            warm: Number((many.warm.mibPerSecond / one.warm.mibPerSecond).toFixed(2)),
          },
        },
        null,
        2,
      ),
    );
  } finally {
    await fsp.rm(work, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
