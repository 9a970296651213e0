/**
 * What holds an upsert replica's memory during a merge (`upsert-merge-memory`): a table of N
 * keys seeded as bench/upsert-e2e.ts seeds one (LanceTable in upsert mode, the key's BTREE,
 * compacted), then ONE merge of a publication of change records (80 % updates, 10 % new keys,
 * 10 % tombstones: bench/lib/upsert-changes.ts) through the project's merge code, in a fresh
 * process (malloc-tuned as a replica) whose peak RSS (VmHWM, reset just before the merge) and
 * RSS before are read from /proc/self/status. Each arm varies one thing against the replica's
 * merge: the table's size, the position condition, the table's columns, a compacted or
 * uncompacted table, the connection's caches, Lance's environment, the rows per merge. Every
 * arm merges into its own hard-linked copy of the seeded table (Lance never rewrites a file).
 *
 *   npm run build && node dist/bench/upsert-merge-memory.js [--keys 1000000,3000000,10000000]
 *     [--repeat 2] [--arms all|id,id] [--changes 100000] [--dir /path/with/disk]
 *     [--json runs.json] [--report bench/upsert-merge-memory.md]
 *
 * Tables above 3M keys run once whatever --repeat says. `--from-json runs.json` writes the
 * report again from a run's measurements (same --keys, --changes, --repeat).
 */
import { execFileSync, spawn } from 'node:child_process';
import { promises as fsp, readFileSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import {
  Bool,
  Field,
  Int32,
  Int64,
  RecordBatch,
  Schema,
  Struct,
  Table as ArrowTable,
  TimeUnit,
  Timestamp,
  Utf8,
  makeData,
  vectorFromArray,
  type Data,
} from 'apache-arrow';
import { silentLogger } from '../src/common/logger';
import { withMallocTuning } from '../src/common/malloc-tuning';
import { LanceTable, type LanceTarget } from '../src/lance/lance-table';
import { mergeNewest } from '../src/lance/upsert-merge';
import { newerCondition } from '../src/lance/upsert-order';
import { reduceToNewest, withTableColumns } from '../src/lance/upsert-reduce';
import { DELETED_COLUMN } from '../src/staging/system-columns';
import { MiB, round } from './lib/result';
import { DELETE, changePlan, changeValue, keyName, partitionOf, planCounts } from './lib/upsert-changes';
import { PARTITIONS, SEED_SCHEMA, SEED_TIME, seedBatch } from './upsert-e2e';
import { arg } from './lib/args';

const TABLE = 'logs';
const KEY = ['_key'];
const CHANGE_TOPIC = 'bench-upsert-changes';

/** How the seeded table is laid out. */
type Layout =
  /** As bench/upsert-e2e.ts seeds it: adds of 500,000 rows, then the replica's compaction (BTREE, system indexes). */
  | 'compacted'
  /** Adds of 50,000 rows (a replica's publications), never compacted: no index, many fragments. */
  | 'fragments'
  /** Compacted, with one more column the merge's condition never names (`pad`, 400 bytes a row). */
  | 'wide';

/** Which merge runs. */
type Merge =
  /** LanceTable.append in upsert mode: what a replica runs (reduce, widen, mergeNewest). */
  | 'replica'
  /** mergeNewest itself on a connection of the arm's own (its Session). */
  | 'merge-newest'
  /** The same merge with no position condition: `whenMatchedUpdateAll()`. */
  | 'no-condition'
  /** The same merge with a condition naming one target column: `source._offset > target._offset`. */
  | 'offset-condition'
  /** A condition naming the position's two string columns only (`_topic`, `_topic_id`). */
  | 'strings-condition'
  /** A condition naming the position's three number columns only (`_partition`, `_offset`, `_timestamp`). */
  | 'numbers-condition'
  /** mergeNewest through the key's BTREE (`useIndex(true)`): unsafe under concurrent writers, for scale. */
  | 'index-join'
  /** The replica's merge plus `whenNotMatchedBySourceDelete({ where: 'false' })`: Lance's other plan. */
  | 'by-source-false';

interface Arm {
  readonly id: string;
  readonly label: string;
  readonly keys: number;
  readonly layout: Layout;
  readonly merge: Merge;
  readonly changes: number;
  /** The connection's LanceDB Session (index and metadata cache bytes); absent: LanceDB's default. */
  readonly session?: { readonly index: number; readonly metadata: number };
  readonly env?: Readonly<Record<string, string>>;
  /** The CPUs the process may run on (`taskset -c`); absent: all. */
  readonly cpus?: string;
}

interface Measured {
  readonly rssBeforeMiB: number;
  readonly peakMiB: number;
  readonly rssAfterMiB: number;
  readonly seconds: number;
  readonly inserted: number;
  readonly updated: number;
  readonly rowsAfter: number;
  readonly liveAfter: number;
}

function status(): { rss: number; hwm: number } {
  const text = readFileSync('/proc/self/status', 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN);
  return { rss: kib('VmRSS') * 1024, hwm: kib('VmHWM') * 1024 };
}

/** The publication: `count` change records as a replica stages them for bench/upsert-e2e.ts's definition. */
function changeBatch(keys: number, count: number): RecordBatch {
  const plan = changePlan(keys, count, 7);
  const offsets = new Array<number>(PARTITIONS).fill(0);
  const ks = Array.from(plan.keys);
  const partition = ks.map((k) => partitionOf(k, PARTITIONS));
  const offset = partition.map((p) => BigInt(offsets[p]!++));
  const values = ks.map((_, i) => changeValue(plan, i));
  const parsed = values.map((v) => (v === null ? null : (JSON.parse(v) as { n: number; body: string })));
  const columns: Data[] = [
    vectorFromArray(
      ks.map(() => CHANGE_TOPIC),
      new Utf8(),
    ).data[0]!,
    vectorFromArray(partition, new Int32()).data[0]!,
    vectorFromArray(offset, new Int64()).data[0]!,
    vectorFromArray(
      ks.map((_, i) => SEED_TIME + 86_400_000 + i),
      new Timestamp(TimeUnit.MILLISECOND),
    ).data[0]!,
    vectorFromArray(
      ks.map(() => ''),
      new Utf8(),
    ).data[0]!,
    vectorFromArray(ks.map(keyName), new Utf8()).data[0]!,
    vectorFromArray(
      ks.map((_, i) => plan.kinds[i] === DELETE),
      new Bool(),
    ).data[0]!,
    vectorFromArray(
      parsed.map((p) => (p === null ? null : BigInt(p.n))),
      new Int64(),
    ).data[0]!,
    vectorFromArray(
      parsed.map((p) => p?.body ?? null),
      new Utf8(),
    ).data[0]!,
  ];
  return new RecordBatch(
    SEED_SCHEMA,
    makeData({ type: new Struct(SEED_SCHEMA.fields), length: count, nullCount: 0, children: columns }),
  );
}

const PAD = new Field('pad', new Utf8(), true);
const WIDE_SCHEMA = new Schema([...SEED_SCHEMA.fields, PAD]);

/** A seeded batch with the wide layout's `pad` column. */
function withPad(batch: RecordBatch): RecordBatch {
  const pad = vectorFromArray(
    Array.from({ length: batch.numRows }, (_, i) => `pad ${i} `.padEnd(400, '.')),
    new Utf8(),
  ).data[0]!;
  return new RecordBatch(
    WIDE_SCHEMA,
    makeData({
      type: new Struct(WIDE_SCHEMA.fields),
      length: batch.numRows,
      nullCount: 0,
      children: [...batch.data.children, pad],
    }),
  );
}

/** The seeded table of `keys` keys in `layout`, made once under `dir` and reused. */
async function seeded(dir: string, keys: number, layout: Layout): Promise<string> {
  const uri = path.join(dir, `seed-${keys}-${layout}`);
  const done = path.join(uri, '.seeded');
  if (await fsp.stat(done).catch(() => undefined)) return uri;
  await fsp.rm(uri, { recursive: true, force: true });
  const started = performance.now();
  const target: LanceTarget = { uri, table: TABLE };
  const schema = layout === 'wide' ? WIDE_SCHEMA : SEED_SCHEMA;
  const created = await LanceTable.connect(target, silentLogger(), { upsertKey: KEY });
  await created.ensureSchema(schema);
  created.close();
  const db = await lancedb.connect(uri);
  const raw = await db.openTable(TABLE);
  const chunk = layout === 'fragments' ? 50_000 : 500_000;
  for (let from = 0; from < keys; from += chunk) {
    const plain = seedBatch(from, Math.min(chunk, keys - from));
    const batch = layout === 'wide' ? withPad(plain) : plain;
    await raw.add({ schema: batch.schema, batches: [batch] } as never);
  }
  raw.close();
  db.close();
  if (layout !== 'fragments') {
    const compacting = await LanceTable.connect(target, silentLogger(), { upsertKey: KEY });
    await compacting.optimize();
    compacting.close();
  }
  await fsp.writeFile(done, '');
  process.stderr.write(
    `[upsert-merge-memory] seeded ${keys} keys (${layout}) in ${((performance.now() - started) / 1000).toFixed(0)} s\n`,
  );
  return uri;
}

/** The child: one merge into the table at `uri`, measured. */
async function child(arm: Arm, uri: string): Promise<Measured> {
  const target: LanceTarget = { uri, table: TABLE };
  const batch = changeBatch(arm.keys, arm.changes);
  let run: () => Promise<{ inserted: number; updated: number }>;
  let db: lancedb.Connection | undefined;
  if (arm.merge === 'replica') {
    const table = await LanceTable.connect(target, silentLogger(), { upsertKey: KEY });
    await table.ensureSchema(batch.schema);
    run = async () => {
      const written = await table.append({
        mode: 'upsert',
        batches: (async function* () {
          yield await Promise.resolve(batch);
        })(),
      });
      return { inserted: written.merge?.inserted ?? NaN, updated: written.merge?.updated ?? NaN };
    };
  } else {
    // The replica's connection (connect.ts: every read at the latest version), with a Session when the arm names one.
    const session = arm.session
      ? new lancedb.Session(BigInt(arm.session.index), BigInt(arm.session.metadata))
      : undefined;
    db = await lancedb.connect(uri, { readConsistencyInterval: 0 }, session);
    const table = await db.openTable(TABLE);
    run = async () => {
      const reduced = withTableColumns(reduceToNewest([batch], KEY), await table.schema());
      if (arm.merge === 'merge-newest' || arm.merge === 'index-join') {
        const outcome = await mergeNewest(
          table,
          KEY,
          reduced,
          false,
          arm.merge === 'index-join' ? 'index' : 'scan',
        );
        return { inserted: outcome.inserted, updated: outcome.updated };
      }
      {
        const conditions: Readonly<Record<string, string | undefined>> = {
          'no-condition': undefined,
          'offset-condition': 'source._offset > target._offset',
          'strings-condition': 'source._topic <> target._topic OR source._topic_id <> target._topic_id',
          'numbers-condition':
            '(source._partition = target._partition AND source._offset > target._offset) OR source._timestamp > target._timestamp',
          'by-source-false': newerCondition(false),
        };
        const where = conditions[arm.merge];
        let builder = table
          .mergeInsert(KEY)
          .whenMatchedUpdateAll(where === undefined ? undefined : { where })
          .whenNotMatchedInsertAll()
          .useIndex(false);
        if (arm.merge === 'by-source-false')
          builder = builder.whenNotMatchedBySourceDelete({ where: 'false' });
        const result = await builder.execute(new ArrowTable(reduced.table.batches));
        return { inserted: result.numInsertedRows, updated: result.numUpdatedRows };
      }
    };
  }
  // Let the JS side settle so that "before" is the process with the publication in hand.
  await new Promise((r) => setTimeout(r, 200));
  const before = status();
  // Resets VmHWM to the current RSS (Linux ≥ 4.0): the peak read after is the merge's.
  writeFileSync('/proc/self/clear_refs', '5');
  const t0 = performance.now();
  const counts = await run();
  const seconds = (performance.now() - t0) / 1000;
  const after = status();
  const check = await lancedb.connect(uri);
  const t = await check.openTable(TABLE);
  const rowsAfter = await t.countRows();
  const liveAfter = await t.countRows(`${DELETED_COLUMN} = false`);
  t.close();
  check.close();
  db?.close();
  return {
    rssBeforeMiB: round(before.rss / MiB, 0),
    peakMiB: round(after.hwm / MiB, 0),
    rssAfterMiB: round(after.rss / MiB, 0),
    seconds: round(seconds, 2),
    ...counts,
    rowsAfter,
    liveAfter,
  };
}

/** The arm in a fresh process, on a hard-linked copy of its seeded table. */
async function runArm(arm: Arm, dir: string): Promise<Measured> {
  const seed = await seeded(dir, arm.keys, arm.layout);
  const copy = path.join(dir, 'runs', arm.id);
  await fsp.rm(copy, { recursive: true, force: true });
  await fsp.mkdir(path.dirname(copy), { recursive: true });
  execFileSync('cp', ['-al', seed, copy]);
  try {
    const out = await new Promise<string>((resolve, reject) => {
      const command = [process.execPath, __filename, '--child', JSON.stringify(arm), copy];
      const [program, ...args] = arm.cpus ? ['taskset', '-c', arm.cpus, ...command] : command;
      const p = spawn(program!, args, {
        env: { ...withMallocTuning(process.env), ...arm.env },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let text = '';
      p.stdout.on('data', (d: Buffer) => (text += d.toString()));
      p.on('exit', (code) =>
        code === 0 ? resolve(text) : reject(new Error(`arm ${arm.id} exited ${code}`)),
      );
    });
    return JSON.parse(out.trim().split('\n').pop()!) as Measured;
  } finally {
    await fsp.rm(copy, { recursive: true, force: true });
  }
}

function arms(sizes: readonly number[], changes: number): Arm[] {
  const [small = 1_000_000, large = sizes[1] ?? small] = sizes;
  const base = (keys: number): Omit<Arm, 'id' | 'label'> => ({
    keys,
    layout: 'compacted',
    merge: 'replica',
    changes,
  });
  const m = (n: number) => `${n / 1_000_000}M`;
  return [
    ...sizes.flatMap((keys): Arm[] => [
      { ...base(keys), id: `replica-${m(keys)}`, label: `replica's merge, ${m(keys)} keys` },
      {
        ...base(keys),
        merge: 'no-condition',
        id: `no-condition-${m(keys)}`,
        label: `no position condition, ${m(keys)} keys`,
      },
      {
        ...base(keys),
        merge: 'index-join',
        id: `index-join-${m(keys)}`,
        label: `mergeNewest through the BTREE (\`useIndex(true)\`, unsafe under concurrent writers), ${m(keys)} keys`,
      },
    ]),
    ...[small, large].flatMap((keys): Arm[] => [
      {
        ...base(keys),
        merge: 'offset-condition',
        id: `offset-condition-${m(keys)}`,
        label: `condition \`source._offset > target._offset\` only, ${m(keys)} keys`,
      },
      {
        ...base(keys),
        merge: 'strings-condition',
        id: `strings-condition-${m(keys)}`,
        label: `condition naming \`target._topic\`, \`target._topic_id\` only, ${m(keys)} keys`,
      },
      {
        ...base(keys),
        merge: 'numbers-condition',
        id: `numbers-condition-${m(keys)}`,
        label: `condition naming \`target._partition\`, \`_offset\`, \`_timestamp\` only, ${m(keys)} keys`,
      },
      {
        ...base(keys),
        layout: 'wide',
        id: `wide-${m(keys)}`,
        label: `table with a 400-byte column more, ${m(keys)} keys`,
      },
      {
        ...base(keys),
        layout: 'fragments',
        id: `fragments-${m(keys)}`,
        label: `uncompacted (adds of 50,000, no index), ${m(keys)} keys`,
      },
      {
        ...base(keys),
        merge: 'merge-newest',
        session: { index: 16 * MiB, metadata: 16 * MiB },
        id: `session-${m(keys)}`,
        label: `Session(16 MiB index cache, 16 MiB metadata cache), mergeNewest, ${m(keys)} keys`,
      },
      {
        ...base(keys),
        env: { LANCE_MEM_POOL_SIZE: String(64 * MiB) },
        id: `mem-pool-${m(keys)}`,
        label: `LANCE_MEM_POOL_SIZE=64 MiB, ${m(keys)} keys`,
      },
      {
        ...base(keys),
        env: { LANCE_CPU_THREADS: '1', LANCE_IO_THREADS: '2' },
        id: `threads-${m(keys)}`,
        label: `LANCE_CPU_THREADS=1 LANCE_IO_THREADS=2, ${m(keys)} keys`,
      },
      {
        ...base(keys),
        changes: changes / 10,
        id: `rows-small-${m(keys)}`,
        label: `${(changes / 10).toLocaleString('en-US')} changes, ${m(keys)} keys`,
      },
      {
        ...base(keys),
        changes: changes * 2,
        id: `rows-large-${m(keys)}`,
        label: `${(changes * 2).toLocaleString('en-US')} changes, ${m(keys)} keys`,
      },
      {
        ...base(keys),
        cpus: '0',
        id: `one-cpu-${m(keys)}`,
        label: `one CPU (\`taskset -c 0\`), ${m(keys)} keys`,
      },
      {
        ...base(keys),
        merge: 'by-source-false',
        id: `by-source-false-${m(keys)}`,
        label: `+ \`whenNotMatchedBySourceDelete({ where: 'false' })\`, ${m(keys)} keys`,
      },
    ]),
  ];
}

interface Result extends Arm {
  readonly runs: readonly Measured[];
}

/** What the merge added to the process at its peak (VmHWM after − VmRSS before), per run. */
const growth = (r: Result) => r.runs.map((m) => m.peakMiB - m.rssBeforeMiB);
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
/** An arm's id without its size: arms of one family differ only in the table's keys. */
const family = (r: Arm) => r.id.replace(/-[\d.]+M$/, '');

function table(results: readonly Result[]): string[] {
  const n = (v: number) => v.toLocaleString('en-US');
  const each = (r: Result, f: (m: Measured) => number) => r.runs.map(f).join(', ');
  return [
    '| arm | keys | changes | peak RSS MiB | RSS before MiB | peak − before MiB | s | inserted, updated | rows, live after |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...results.map((r) => {
      const last = r.runs[r.runs.length - 1]!;
      return `| ${r.label} | ${n(r.keys)} | ${n(r.changes)} | ${each(r, (m) => m.peakMiB)} | ${each(r, (m) => m.rssBeforeMiB)} | ${growth(r).join(', ')} | ${each(r, (m) => m.seconds)} | ${n(last.inserted)}, ${n(last.updated)} | ${n(last.rowsAfter)}, ${n(last.liveAfter)} |`;
    }),
  ];
}

/** Per family measured at two sizes or more: the growth's slope in MiB per million keys (least squares). */
function slopes(results: readonly Result[]): string[] {
  const byFamily = new Map<string, Result[]>();
  for (const r of results) byFamily.set(family(r), [...(byFamily.get(family(r)) ?? []), r]);
  const lines: string[] = [];
  for (const [name, rs] of byFamily) {
    if (new Set(rs.map((r) => r.keys)).size < 2) continue;
    const points = rs.flatMap((r) => growth(r).map((g) => [r.keys / 1e6, g] as const));
    const mx = mean(points.map(([x]) => x));
    const my = mean(points.map(([, y]) => y));
    const slope =
      points.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0) /
      points.reduce((a, [x]) => a + (x - mx) ** 2, 0);
    const at = rs.map((r) => `${r.keys / 1e6}M: ${round(mean(growth(r)), 0)}`).join(', ');
    lines.push(`- \`${name}\`: ${round(slope, 0)} MiB per million keys (mean growth ${at} MiB)`);
  }
  return lines;
}

async function main(): Promise<void> {
  if (process.argv[2] === '--child') {
    const measured = await child(JSON.parse(process.argv[3]!) as Arm, process.argv[4]!);
    process.stdout.write(`${JSON.stringify(measured)}\n`);
    return;
  }
  const sizes = arg('keys', '1000000,3000000').split(',').map(Number);
  const changes = Number(arg('changes', '100000'));
  const repeat = Number(arg('repeat', '2'));
  const dir = arg('dir', path.join(os.tmpdir(), 'upsert-merge-memory'));
  const report = arg('report', '');
  const wanted = arg('arms', 'all');
  await fsp.mkdir(dir, { recursive: true });
  const all = arms(sizes, changes).filter((a) => wanted === 'all' || wanted.split(',').includes(a.id));
  const runs = new Map<string, Measured[]>(all.map((a) => [a.id, []]));
  const started = Date.now();
  // --from-json: the report again from a run's measurements (its text changed, not the merges).
  const saved = arg('from-json', '');
  const json = arg('json', '');
  if (saved) {
    const earlier = JSON.parse(await fsp.readFile(saved, 'utf8')) as {
      command: string;
      at: string;
      seconds: number;
      results: Result[];
    };
    await write(
      earlier.results,
      earlier.command,
      earlier.at,
      earlier.seconds,
      sizes,
      changes,
      repeat,
      report,
    );
    return;
  }
  // Round after round (every arm once per round), so that the machine's load shifts spread over the arms.
  for (let pass = 0; pass < repeat; pass++)
    for (const arm of all) {
      // Tables above 3M keys once: each such merge holds gigabytes of a shared machine.
      if (pass > 0 && arm.keys > 3_000_000) continue;
      const measured = await runArm(arm, dir);
      runs.get(arm.id)!.push(measured);
      process.stderr.write(`[upsert-merge-memory] ${arm.id}: ${JSON.stringify(measured)}\n`);
    }
  const results: Result[] = all.map((a) => ({ ...a, runs: runs.get(a.id)! }));
  const command = `node dist/bench/upsert-merge-memory.js ${process.argv.slice(2).join(' ')}`;
  const at = new Date().toISOString();
  const seconds = Math.round((Date.now() - started) / 1000);
  if (json) await fsp.writeFile(json, JSON.stringify({ command, at, seconds, results }, null, 1));
  await write(results, command, at, seconds, sizes, changes, repeat, report);
}

async function write(
  results: readonly Result[],
  command: string,
  at: string,
  seconds: number,
  sizes: readonly number[],
  changes: number,
  repeat: number,
  report: string,
): Promise<void> {
  const counts = planCounts(changePlan(sizes[0]!, changes, 7));
  const labels = new Map(arms(sizes, changes).map((a) => [a.id, a.label]));
  const lines = [
    '# Upsert merge memory: what one merge holds',
    '',
    `Generated by \`${command}\` (bench/upsert-merge-memory.ts) on ${at} (${os.cpus().length} cores, ${Math.round(os.totalmem() / 1024 ** 3)} GiB, Node ${process.version}, LanceDB ${lancedbVersion()}), ${seconds} s in all, on a machine shared with other work.`,
    '',
    `Each arm: a fresh process (malloc-tuned as \`bin/kafka-lance\`) opens a hard-linked copy of a table seeded as bench/upsert-e2e.ts seeds one (${sizes.map((s) => s.toLocaleString('en-US')).join(', ')} keys; ~100-byte rows: the system columns, \`_key\`, \`_deleted\`, an int64 and a 72-byte string; LanceTable in upsert mode, so primary key \`_key\` and its BTREE; then the replica's compaction), holds one publication of change records as a replica stages them (${changes.toLocaleString('en-US')} unless the arm says otherwise: ${counts.updates.toLocaleString('en-US')} updates, ${counts.inserts.toLocaleString('en-US')} new keys, ${counts.deletes.toLocaleString('en-US')} tombstones in the ${sizes[0]! / 1e6}M plan), resets its VmHWM (\`/proc/self/clear_refs\`), runs ONE merge and reads VmHWM (the merge's peak) and VmRSS from /proc/self/status. "replica's merge" is \`LanceTable.append\` in upsert mode (reduce, widen, \`mergeNewest\`: \`useIndex(false)\`, the position condition of upsert-order.ts); each other arm changes one thing. ${repeat} run${repeat === 1 ? '' : 's'} per arm, in rounds; each cell lists them.`,
    '',
    // Labels as the code says them now (a --from-json run keeps the measured arms' ids).
    ...table(results.map((r) => ({ ...r, label: labels.get(r.id) ?? r.label }))),
    '',
    '## Growth with the table',
    '',
    ...slopes(results),
    '',
    READING,
  ];
  const text = `${lines.join('\n')}\n`;
  // Formatted as the repository's prettier would, so the written file passes `prettier --check`.
  if (report) {
    const prettier = await import('prettier');
    const options = await prettier.resolveConfig(report);
    await fsp.writeFile(report, await prettier.format(text, { ...options, filepath: report }));
  }
  process.stdout.write(text);
}

function lancedbVersion(): string {
  // The package's exports hide its package.json: read it next to its entry point (dist/index.js).
  const file = path.join(path.dirname(require.resolve('@lancedb/lancedb')), '..', 'package.json');
  const manifest = JSON.parse(readFileSync(file, 'utf8')) as {
    version: string;
  };
  return manifest.version;
}

/** Why the arms come out as they do: read from Lance's source (the figures are in the tables above). */
const READING = `## Reading it

- **What holds it: the target's side of the merge's hash join.** Lance (12.0.0 in LanceDB 0.39's binary; read in two versions of its source, a November 2025 snapshot and a later one, which plan it alike) plans this merge (\`whenMatchedUpdateAll\` with a condition, \`whenNotMatchedInsertAll\`, no by-source delete, the source holding the table's columns, \`useIndex(false)\`) on its DataFusion path, \`MergeInsertJob::create_plan\` in rust/lance/src/dataset/write/merge_insert.rs: \`scan_aliased.join(source_df_aliased, JoinType::Right, on, on)\`, the table's scan as the LEFT input. DataFusion's hash join collects and hashes its left input before it reads a row of the right, and swaps them only on statistics that the one-shot source lacks: so every row of the table is held, with each column the plan needs of it, the key, \`_rowid\` and \`_rowaddr\` (the write node's \`necessary_children_exprs\`, logical_plan.rs) and every target column the \`whenMatchedUpdateAll\` condition names. The plan then runs with \`TaskContext::default()\` (\`execute_uncommitted_v2\`): no memory pool, so nothing bounds or spills it.
- **The position condition is half of it.** It names five target columns (\`_topic\`, \`_topic_id\`, \`_partition\`, \`_offset\`, \`_timestamp\`; \`_row\` and \`_sequence\` too when the table has them). Without any condition (\`no-condition\`: the key, \`_rowid\` and \`_rowaddr\` alone) the merge grows about half as fast; a condition naming the two string columns alone, or the three number columns alone, lands between the two. The condition cannot name fewer: it is the rule (upsert-order.ts) that keeps a replay or a late owner from overwriting a newer row. A longer topic name costs more: \`_topic\` is held as a string per row.
- **What does not change it.** A column the condition does not name is not read (\`wide\`: 400 bytes more a row, same slope); compaction (\`fragments\`: 20 fragments per million rows, no index); the connection's Session caches (16 MiB each); \`LANCE_MEM_POOL_SIZE\` (the pool of Lance's other plans, not this one's); Lance's CPU and IO threads; one CPU (\`taskset -c 0\`: DataFusion's partitions and Lance's threads follow the CPUs); the rows per merge (10,000 to 200,000: the table is the build side, the publication the probe). \`whenNotMatchedBySourceDelete({ where: 'false' })\`, which older Lance releases sent down their other path (the source as the build side), grows as much in this one.
- **What would bound it, and is not in LanceDB 0.39's Node API.** The join built on the source, the table streamed as the probe side: lance-format/lance PR #7382 ("stream the target on the probe side of the merge_insert join", open), which would make the merge hold the publication instead of the table. Or a memory pool for this plan (lance#1983, PR #7719 open), which would make a merge fail rather than grow: DataFusion's hash join does not spill its build side (\`HashJoinInput(can spill: false)\` in lance#8269). The Node \`MergeInsertBuilder\` offers \`whenMatchedUpdateAll\`, \`whenNotMatchedInsertAll\`, \`whenNotMatchedBySourceDelete\`, \`useIndex\`, \`useLsm\`, \`validateSingleShard\` and \`execute(data, { timeoutMs })\`: no join side, no DataFusion or memory setting. The join through the key's BTREE (\`index-join\`) looks the publication's keys up and grows far slower, but it is the join that inserts a new key twice under concurrent merges (docs/design/upserts.md), so it is no lever; \`useLsm\` (the MemWAL write path) takes only the upsert form without a condition (LanceDB's own error message), so not the position rule.`;

if (require.main === module)
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
