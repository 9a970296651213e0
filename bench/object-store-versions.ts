/**
 * How opening and counting a Lance table grow with its versions and fragments, on an
 * object store (s3proxy, no atomic commits) and on a local directory, and whether
 * compaction with version cleanup (LanceTable.optimize, as the compactor runs it)
 * keeps them flat. Two arms per store, on one table each:
 *
 *   - `appends only`: N small appends (one version and one fragment each);
 *   - `optimize every K`: the same appends, compaction + cleanup after every K;
 *   - `optimize every K, no cleanup`: compaction only (versions pile up, fragments do not).
 *
 * Every K versions it records: a fresh connect + openTable, countRows() of the whole
 * table, countRows('_partition = 0 AND _offset BETWEEN a AND b') (the publication
 * check's shape), listVersions() (what every cleanup reads), fragments and versions.
 * The `appends only` arm ends with one optimize + cleanup and the same measurements.
 * Timings are medians of 3. Writes bench/object-store-versions.md.
 *
 *   npm run build && node dist/bench/object-store-versions.js [--appends 300] [--every 50] \
 *     [--rows 100] [--uri s3://kafka-lance/bench] [--s3-port 19914] [--local-dir /tmp/x] [--out bench/object-store-versions.md]
 *
 * Without --uri it starts deploy/s3-local on --s3-port (S3_TEST_PORT, default 19914)
 * unless one runs there, and stops it afterwards if it started it.
 */
import { spawnSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { ulid } from 'ulid';
import { silentLogger } from '../src/common/logger';
import { LanceTable, type LanceTarget } from '../src/lance/lance-table';
import { range, rowsFor } from '../test/support/rows';
import { S3_BUCKET, storageOptions } from '../test/support/s3-local';
import { benchArgs } from './args';

const TABLE = 'versions';
const TOPIC = 'bench';

interface Sample {
  readonly store: string;
  readonly arm: string;
  readonly appends: number;
  readonly versions: number;
  readonly fragments: number;
  readonly openMs: number;
  readonly countAllMs: number;
  readonly countRangeMs: number;
  readonly listVersionsMs: number;
  readonly optimizeMs?: number;
}

/** deploy/s3-local from dist/bench (test/support's helper resolves it from test/support). */
function s3Local(command: 'start' | 'stop' | 'status', port: number): { code: number; output: string } {
  const result = spawnSync(path.join(__dirname, '../../deploy/s3-local/s3-local'), [command], {
    env: { ...process.env, S3_LOCAL_PORT: String(port) },
    encoding: 'utf8',
  });
  return { code: result.status ?? 1, output: `${result.stdout}${result.stderr}`.trim() };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function timed<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const t0 = performance.now();
  const value = await fn();
  return [value, performance.now() - t0];
}

async function measure(
  target: LanceTarget,
  store: string,
  arm: string,
  appends: number,
  rowsPerAppend: number,
): Promise<Omit<Sample, 'optimizeMs'>> {
  const opens: number[] = [];
  const all: number[] = [];
  const ranges: number[] = [];
  const lists: number[] = [];
  let versions = 0;
  let fragments = 0;
  const expected = appends * rowsPerAppend;
  // A range in the middle of the partition's offsets: one publication's worth of rows.
  const first = Math.floor(appends / 2) * rowsPerAppend;
  const filter = `_partition = 0 AND _offset BETWEEN ${first} AND ${first + rowsPerAppend - 1}`;
  for (let i = 0; i < 3; i++) {
    const [{ db, table }, openMs] = await timed(async () => {
      const db = await lancedb.connect(target.uri, {
        ...(target.storageOptions ? { storageOptions: { ...target.storageOptions } } : {}),
      });
      return { db, table: await db.openTable(TABLE) };
    });
    try {
      const [total, allMs] = await timed(() => table.countRows());
      const [inRange, rangeMs] = await timed(() => table.countRows(filter));
      if (total !== expected || inRange !== rowsPerAppend)
        throw new Error(
          `${store}/${arm}: counted ${total} and ${inRange}, expected ${expected} and ${rowsPerAppend}`,
        );
      const [list, listMs] = await timed(() => table.listVersions());
      versions = list.length;
      fragments = (await table.stats()).fragmentStats.numFragments;
      opens.push(openMs);
      all.push(allMs);
      ranges.push(rangeMs);
      lists.push(listMs);
    } finally {
      table.close();
      db.close();
    }
  }
  return {
    store,
    arm,
    appends,
    versions,
    fragments,
    openMs: median(opens),
    countAllMs: median(all),
    countRangeMs: median(ranges),
    listVersionsMs: median(lists),
  };
}

async function* batchesOf(from: number, rows: number) {
  yield await Promise.resolve(rowsFor(TOPIC, 0, range(from, from + rows)));
}

async function runArm(
  target: LanceTarget,
  store: string,
  optimizeEvery: number | undefined,
  keepVersions: boolean,
  appends: number,
  every: number,
  rowsPerAppend: number,
): Promise<Sample[]> {
  const arm = optimizeEvery
    ? `optimize every ${optimizeEvery}${keepVersions ? ', no cleanup' : ''}`
    : 'appends only';
  const lance = await LanceTable.connect(target, silentLogger());
  const samples: Sample[] = [];
  // As the compactor would with a retention of 1 ms (keep only what was the latest a
  // moment ago), or with cleanup off (0).
  const optimize = async (): Promise<number> => {
    const [, ms] = await timed(() => lance.optimize(keepVersions ? 0 : 1));
    return ms;
  };
  try {
    for (let n = 1; n <= appends; n++) {
      await lance.append({ batches: batchesOf((n - 1) * rowsPerAppend, rowsPerAppend) });
      if (n % every !== 0) continue;
      const optimizeMs = optimizeEvery && n % optimizeEvery === 0 ? await optimize() : undefined;
      const sample = await measure(target, store, arm, n, rowsPerAppend);
      samples.push(optimizeMs === undefined ? sample : { ...sample, optimizeMs });
      console.log(JSON.stringify(samples.at(-1)));
    }
    if (!optimizeEvery) {
      const optimizeMs = await optimize();
      samples.push({
        ...(await measure(target, store, `${arm}, then optimize`, appends, rowsPerAppend)),
        optimizeMs,
      });
      console.log(JSON.stringify(samples.at(-1)));
    }
  } finally {
    lance.close();
  }
  return samples;
}

function table(samples: readonly Sample[]): string {
  const f = (ms: number | undefined) => (ms === undefined ? '' : ms.toFixed(ms < 10 ? 1 : 0));
  const header = [
    'store',
    'arm',
    'appends',
    'versions',
    'fragments',
    'open ms',
    'countRows() ms',
    'countRows(range) ms',
    'listVersions ms',
    'optimize ms',
  ];
  const rows = samples.map((s) => [
    s.store,
    s.arm,
    String(s.appends),
    String(s.versions),
    String(s.fragments),
    f(s.openMs),
    f(s.countAllMs),
    f(s.countRangeMs),
    f(s.listVersionsMs),
    f(s.optimizeMs),
  ]);
  // Padded as prettier formats Markdown tables, so the written file passes `prettier --check`.
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

async function main(): Promise<void> {
  const args = benchArgs();
  const appends = Number(args.get('appends') ?? 300);
  const every = Number(args.get('every') ?? 50);
  const rowsPerAppend = Number(args.get('rows') ?? 100);
  const port = Number(args.get('s3-port') ?? process.env.S3_TEST_PORT ?? 19914);
  const out = args.get('out') ?? path.join(__dirname, '../../bench/object-store-versions.md');
  let startedS3 = false;
  const base = args.get('uri');
  if (!base && s3Local('status', port).code !== 0) {
    const started = s3Local('start', port);
    if (started.code !== 0) throw new Error(`could not start s3-local on ${port}:\n${started.output}`);
    startedS3 = true;
  }
  const localDir = args.get('local-dir') ?? (await fsp.mkdtemp(path.join(os.tmpdir(), 'kl-versions-')));
  const s3Base = base ?? `s3://${S3_BUCKET}/bench-versions`;
  const samples: Sample[] = [];
  const started = new Date();
  try {
    for (const [optimizeEvery, keepVersions] of [
      [undefined, false],
      [every, false],
      [every, true],
    ] as const) {
      const run = ulid().toLowerCase();
      samples.push(
        ...(await runArm(
          { uri: `${s3Base}-${run}`, table: TABLE, storageOptions: storageOptions(port) },
          's3proxy',
          optimizeEvery,
          keepVersions,
          appends,
          every,
          rowsPerAppend,
        )),
      );
      samples.push(
        ...(await runArm(
          { uri: path.join(localDir, run), table: TABLE },
          'local dir',
          optimizeEvery,
          keepVersions,
          appends,
          every,
          rowsPerAppend,
        )),
      );
    }
  } finally {
    if (startedS3) s3Local('stop', port);
    if (!args.get('local-dir')) await fsp.rm(localDir, { recursive: true, force: true });
  }
  const order = (s: Sample) =>
    `${s.store === 's3proxy' ? 0 : 1}${s.arm.startsWith('appends') ? 0 : s.arm.includes('no cleanup') ? 2 : 1}`;
  samples.sort((a, b) => order(a).localeCompare(order(b)) || a.appends - b.appends);
  const report = [
    '# Open and count times against versions and fragments',
    '',
    `Written by \`bench/object-store-versions.ts\` on ${started.toISOString()} (${os.cpus().length} cores, Node ${process.version}, LanceDB 0.39):`,
    `${appends} appends of ${rowsPerAppend} rows to one table, measured every ${every}; s3proxy 2.6.0 on this machine (\`deploy/s3-local\`) and a local directory.`,
    'Timings are medians of 3, each on a new connection (open = connect + openTable). The optimize is `LanceTable.optimize` (compaction, index update, cleanup keeping only the version that was the latest a moment ago).',
    '',
    table(samples),
    '',
  ].join('\n');
  await fsp.writeFile(out, report);
  console.log(`\n${report}`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
