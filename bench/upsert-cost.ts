/**
 * What an upsert table costs as it grows: a table of N keys (~100-byte rows, created by
 * LanceTable in upsert mode, so with its BTREE on the key, then compacted), into which M
 * change records go in publications of P rows: 80 % updates of existing keys, 10 % new
 * keys, 10 % tombstones. Each publication is what LanceTable.append does in upsert mode
 * (reduce to the newest per key, one merge): with the merge's join as shipped (a scan of the
 * key column, `scan`) and through the key's BTREE (`index`, unsafe under concurrent writers:
 * docs/design/upserts.md), and the same records appended (`append`) into a copy of the table.
 * Prints changes per second and process CPU seconds (all threads) per GiB of change rows, and
 * with --report writes them with the growth figures and the issue's targets (bench/upserts.md;
 * `npm run bench -- --arms upsert` runs it so).
 *
 *   npm run build && node dist/bench/upsert-cost.js [--keys 1000000,10000000] [--changes 1000000]
 *     [--publication 200000] [--joins scan,index] [--dir /tmp/x] [--report bench/upserts.md]
 */
import { promises as fsp } from 'node:fs';
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
  TimeUnit,
  Timestamp,
  Utf8,
  makeData,
  vectorFromArray,
  type Data,
} from 'apache-arrow';
import { silentLogger } from '../src/common/logger';
import { LanceTable, type LanceTarget } from '../src/lance/lance-table';
import { mergeNewest } from '../src/lance/upsert-merge';
import { reduceToNewest } from '../src/lance/upsert-reduce';
import { DELETED_COLUMN, SYSTEM_FIELDS } from '../src/staging/system-columns';
import { keptSections } from './lib/report-sections';
import { seededRandom } from './lib/upsert-changes';
import { arg } from './lib/args';

const PARTITIONS = 6;
const T0 = Date.UTC(2026, 11, 6);
const SCHEMA = new Schema([
  ...SYSTEM_FIELDS,
  new Field('_key', new Utf8(), false),
  new Field(DELETED_COLUMN, new Bool(), false),
  new Field('n', new Int64(), true),
  new Field('body', new Utf8(), true),
]);
const BODY = 'x'.repeat(48);

/** Rows for (key, deleted) pairs; the offsets of each partition keep growing from `offsets`. */
function changeBatch(
  rows: readonly (readonly [key: number, deleted: boolean])[],
  offsets: number[],
): RecordBatch {
  const partition = rows.map(([k]) => k % PARTITIONS);
  const offset = partition.map((p) => BigInt(offsets[p]!++));
  const columns: Data[] = [
    vectorFromArray(
      rows.map(() => 'bench'),
      new Utf8(),
    ).data[0]!,
    vectorFromArray(partition, new Int32()).data[0]!,
    vectorFromArray(offset, new Int64()).data[0]!,
    vectorFromArray(
      offset.map((o) => T0 + Number(o)),
      new Timestamp(TimeUnit.MILLISECOND),
    ).data[0]!,
    vectorFromArray(
      rows.map(() => 'AAAAAAAAAAAAAAAAAAAAAA'),
      new Utf8(),
    ).data[0]!,
    vectorFromArray(
      rows.map(([k]) => `key-${k.toString().padStart(9, '0')}`),
      new Utf8(),
    ).data[0]!,
    vectorFromArray(
      rows.map(([, d]) => d),
      new Bool(),
    ).data[0]!,
    vectorFromArray(
      rows.map(([k, d]) => (d ? null : BigInt(k))),
      new Int64(),
    ).data[0]!,
    vectorFromArray(
      rows.map(([, d]) => (d ? null : BODY)),
      new Utf8(),
    ).data[0]!,
  ];
  return new RecordBatch(
    SCHEMA,
    makeData({ type: new Struct(SCHEMA.fields), length: rows.length, nullCount: 0, children: columns }),
  );
}

function changes(keys: number, count: number): [number, boolean][] {
  // The same changes for every arm.
  const next = seededRandom(42);
  let fresh = keys;
  return Array.from({ length: count }, (): [number, boolean] => {
    const r = next();
    if (r < 0.8) return [Math.floor(next() * keys), false];
    if (r < 0.9) return [fresh++, false];
    return [Math.floor(next() * keys), true];
  });
}

async function seed(target: LanceTarget, keys: number, offsets: number[]): Promise<void> {
  const table = await LanceTable.connect(target, silentLogger(), { upsertKey: ['_key'] });
  const first = changeBatch([[0, false]], offsets);
  await table.ensureSchema(first.schema);
  table.close();
  const db = await lancedb.connect(target.uri);
  const raw = await db.openTable(target.table);
  await raw.add({ schema: first.schema, batches: [first] } as never);
  for (let from = 1; from < keys; from += 500_000) {
    const rows = Array.from({ length: Math.min(500_000, keys - from) }, (_, i): [number, boolean] => [
      from + i,
      false,
    ]);
    const batch = changeBatch(rows, offsets);
    await raw.add({ schema: batch.schema, batches: [batch] } as never);
  }
  await raw.optimize();
  raw.close();
  db.close();
}

interface Measured {
  readonly seconds: number;
  readonly cpuSeconds: number;
  readonly bytes: number;
}

async function run(
  target: LanceTarget,
  arm: 'scan' | 'index' | 'append',
  batches: readonly RecordBatch[],
): Promise<Measured> {
  const db = await lancedb.connect(target.uri);
  const table = await db.openTable(target.table);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let bytes = 0;
  for (const batch of batches) {
    bytes += batch.data.children.reduce((n, c) => n + c.byteLength, 0);
    if (arm === 'append') await table.add({ schema: batch.schema, batches: [batch] } as never);
    else await mergeNewest(table, ['_key'], reduceToNewest([batch], ['_key']), false, arm);
  }
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  table.close();
  db.close();
  return { seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6, bytes };
}

interface Row {
  readonly keys: number;
  readonly arm: 'scan' | 'index' | 'append';
  readonly perSecond: number;
  readonly m: Measured;
  readonly rows: number;
}

async function main(): Promise<void> {
  const sizes = arg('keys', '1000000,10000000').split(',').map(Number);
  const count = Number(arg('changes', '1000000'));
  const perPublication = Number(arg('publication', '200000'));
  const arms = arg('joins', 'scan,index').split(',') as ('scan' | 'index')[];
  const dir = arg('dir', await fsp.mkdtemp(path.join(os.tmpdir(), 'kl-upsert-cost-')));
  const started = Date.now();
  const results: Row[] = [];
  console.log(HEADER.join('\n'));
  for (const keys of sizes) {
    const base: LanceTarget = { uri: path.join(dir, `seed-${keys}`), table: 'kv' };
    const offsets = Array.from({ length: PARTITIONS }, () => 0);
    await seed(base, keys, offsets);
    const all = changes(keys, count);
    const batches: RecordBatch[] = [];
    for (let i = 0; i < all.length; i += perPublication)
      batches.push(changeBatch(all.slice(i, i + perPublication), offsets));
    for (const arm of [...arms, 'append'] as const) {
      const target: LanceTarget = { uri: path.join(dir, `${arm}-${keys}`), table: 'kv' };
      await fsp.cp(base.uri, target.uri, { recursive: true });
      const m = await run(target, arm, batches);
      const db = await lancedb.connect(target.uri);
      const rows = await (await db.openTable('kv')).countRows();
      db.close();
      const row: Row = { keys, arm, perSecond: count / m.seconds, m, rows };
      results.push(row);
      console.log(line(row));
      await fsp.rm(target.uri, { recursive: true, force: true });
    }
    await fsp.rm(base.uri, { recursive: true, force: true });
  }
  if (!process.argv.includes('--dir')) await fsp.rm(dir, { recursive: true, force: true });
  const report = arg('report', '');
  if (report) {
    const command = `node dist/bench/upsert-cost.js ${process.argv.slice(2).join(' ')}`.trim();
    // Sections other benches keep here (bench/upsert-e2e.ts's) stay, after this report.
    const kept = keptSections(await fsp.readFile(report, 'utf8').catch(() => ''));
    await fsp.writeFile(
      report,
      [
        render(results, { command, count, perPublication, seconds: (Date.now() - started) / 1000 }),
        ...kept,
      ].join('\n'),
    );
    console.log(`report: ${report}`);
  }
}

const HEADER = [
  '| table keys | arm | changes/s | s | CPU s | CPU s / GiB | rows after |',
  '| --- | --- | --- | --- | --- | --- | --- |',
];

function line(r: Row): string {
  return `| ${r.keys.toLocaleString('en-US')} | ${r.arm} | ${Math.round(r.perSecond).toLocaleString('en-US')} | ${r.m.seconds.toFixed(1)} | ${r.m.cpuSeconds.toFixed(1)} | ${(r.m.cpuSeconds / (r.m.bytes / 2 ** 30)).toFixed(1)} | ${r.rows.toLocaleString('en-US')} |`;
}

/** bench/upserts.md: the measurements, the growth figures and the issue's targets. */
function render(
  results: readonly Row[],
  run: { command: string; count: number; perPublication: number; seconds: number },
): string {
  const sizes = [...new Set(results.map((r) => r.keys))].sort((a, b) => a - b);
  const small = sizes[0]!;
  const large = sizes.at(-1)!;
  const at = (keys: number, arm: Row['arm']) => results.find((r) => r.keys === keys && r.arm === arm);
  const ratio = (a: Row | undefined, b: Row | undefined) => (a && b ? a.perSecond / b.perSecond : NaN);
  const joins = [...new Set(results.map((r) => r.arm))].filter((a) => a !== 'append');
  const targets = joins.flatMap((join) => {
    const growth = ratio(at(large, join), at(small, join));
    const vsAppend = ratio(at(large, join), at(large, 'append'));
    return [
      `- ${growth >= 0.5 ? 'PASS' : 'FAIL'}: ${join}: into ${large.toLocaleString('en-US')} keys ≥ 0.5 × into ${small.toLocaleString('en-US')} (${growth.toFixed(2)}×)`,
      `- ${vsAppend >= 0.5 ? 'PASS' : 'FAIL'}: ${join}: into ${large.toLocaleString('en-US')} keys ≥ 0.5 × the append of the same records (${vsAppend.toFixed(3)}×)`,
    ];
  });
  return `${[
    '# Upsert tables: the merge as the table grows',
    '',
    `Generated by \`${run.command}\` (bench/upsert-cost.ts) on ${new Date().toISOString()} (${os.availableParallelism()} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}), ${Math.round(run.seconds)} s in all.`,
    '',
    `A table of N keys (~100-byte rows: the system columns, \`_key\`, \`_deleted\`, an int64 and 48 bytes of text), created by \`LanceTable\` in upsert mode (so with its BTREE on \`_key\`), then compacted. Into a copy of it, ${run.count.toLocaleString('en-US')} change records in publications of ${run.perPublication.toLocaleString('en-US')} (about what \`materializer.maxPublicationBytes\`' 32 MiB holds at this row size): 80 % updates of existing keys, 10 % new keys, 10 % deletes, in one seeded order. Each publication is what a replica does in upsert mode after preparation: reduce to the newest row per key, then one merge (\`scan\`: the key column scanned, as shipped; \`index\`: the join through the BTREE, which lets concurrent writers insert a key twice, docs/design/upserts.md). \`append\`: the same records added as they are, for scale. Not end to end: no Kafka, no staging (the replica's own costs are in [report.md](report.md)). CPU is the process's (all threads, LanceDB's included) per GiB of the change rows' Arrow bytes.`,
    '',
    ...HEADER,
    ...results.map(line),
    '',
    '## Targets',
    '',
    ...targets,
    '',
    '## Reading it',
    '',
    '- A merge rewrites each updated row and marks the old one deleted in its fragment; an append writes new fragments only: the append column is for scale, not a reachable bound.',
    "- The scan reads every key of the table once per publication, so its cost grows with the table; the indexed join looks keys up. The scan is kept because it is the path whose inserted keys Lance checks against a concurrent merge's (docs/design/upserts.md); the indexed join is the lead for speed once something else keeps two writers from inserting one new key at once.",
    '- "rows after" is the same for every join: each update replaced its row, each new key went in once.',
    '- Before the kept rows were copied into one batch (src/lance/take-rows.ts) a publication went to LanceDB as one slice per run of kept rows: 100,000 changes into 100,000 keys ran at 2,266 changes/s (201,250 after).',
  ].join('\n')}\n`;
}

void main();
