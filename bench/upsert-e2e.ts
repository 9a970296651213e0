/**
 * The upsert mode end to end (`e2e-upsert`): a Kafka topic of 1,000,000 keyed change records
 * (~100-byte JSON values; 80 % updates of seeded keys, 10 % new keys, 10 % tombstones,
 * bench/lib/upsert-changes.ts) drained by one replica (`bin/kafka-lance run`, defaults but
 * mode `upsert`, key `record-key`) into a table already holding 1M keys, then one holding 10M
 * (a topic per size, updates spread over the whole table); and the 10M topic drained in append
 * mode into a fresh table (its tombstones are dead letters, append's default). Each arm is
 * timed from the replica's group join to the last change visible: the marker record produced
 * last in every partition readable in the table AND the table's row counts at their expected
 * final values. Then the table is checked: counts, and a sample of keys each held once with
 * its newest value. Figures: a section of bench/upserts.md and of bench/report.md.
 *
 *   npm run build && KAFKA_BOOTSTRAP_SERVERS=... node dist/bench/upsert-e2e.js \
 *     [--keys 1000000,10000000] [--changes 1000000] [--dir /path/with/disk] \
 *     [--report bench/upserts.md] [--bench-report bench/report.md]
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
import { Partitioners } from 'kafkajs';
import { silentLogger } from '../src/common/logger';
import { resolveConsumer } from '../src/config/resolve';
import { scrape, sumOf, type Sample } from '../src/harness/prometheus-text';
import { LanceTable, type LanceTarget } from '../src/lance/lance-table';
import { tableOpeningProblems } from '../src/lance/table-opening';
import { DELETED_COLUMN, SYSTEM_FIELDS } from '../src/staging/system-columns';
import { ensureBroker, kafkaClient, recreateTopic, topicRecords } from './lib/kafka';
import { benchConsumer } from './lib/records';
import { openTable, stageBreakdown, startReplica, stopReplica } from './lib/replica-arm';
import { withSection } from './lib/report-sections';
import { MiB, round } from './lib/result';
import {
  SEEDED_N,
  changePlan,
  changeValue,
  expectedTable,
  keyName,
  markerKey,
  markerValue,
  partitionOf,
  planCounts,
  seededRandom,
  type ChangePlan,
  type Counts,
  type ExpectedTable,
} from './lib/upsert-changes';
import { arg } from './lib/args';

export const PARTITIONS = 6;
const TABLE = 'logs';
const SEED_TOPIC = 'bench-upsert-seed';
/** The seeded rows' time: older than any change record's, which orders them first (upsert-order.ts). */
export const SEED_TIME = Date.UTC(2026, 0, 1);
const FIELDS = { n: 'int64', body: 'string' } as const;
const MARKERS = Array.from({ length: PARTITIONS }, (_, p) => markerKey(p));
const t0 = Date.now();

function log(line: string): void {
  process.stderr.write(`[upsert-e2e ${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${line}\n`);
}

/** The settings over the bench definition: upsert on the record key, or append keeping the key. */
export function definition(mode: 'upsert' | 'append', uri: string): Record<string, unknown> {
  return {
    table: TABLE,
    schema: { fields: FIELDS },
    keyFormat: 'string',
    lance: { uri },
    ...(mode === 'upsert' ? { mode: 'upsert', key: 'record-key' } : { includeKey: true }),
  };
}

/** The change topic of a plan, with one marker record last in every partition; reused when it holds them all. */
async function produceChanges(brokers: readonly string[], topic: string, plan: ChangePlan): Promise<void> {
  const kafka = kafkaClient(brokers);
  const admin = kafka.admin();
  await admin.connect();
  try {
    const want = plan.keys.length + PARTITIONS;
    const existing = await topicRecords(admin, topic);
    if (existing === want) {
      log(`reusing topic ${topic} (${want} records)`);
      return;
    }
    await recreateTopic(admin, topic, PARTITIONS, existing !== undefined);
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    const started = performance.now();
    const perSend = 5_000;
    let next = 0;
    type Message = { key: string; value: string | null };
    while (next < plan.keys.length) {
      const byPartition: Message[][] = Array.from({ length: PARTITIONS }, () => []);
      for (let sent = 0; sent < perSend * PARTITIONS && next < plan.keys.length; sent++, next++) {
        const k = plan.keys[next]!;
        byPartition[partitionOf(k, PARTITIONS)]!.push({ key: keyName(k), value: changeValue(plan, next) });
      }
      // In order per partition: a key's records keep the plan's order (one partition per key).
      await Promise.all(
        byPartition.map((messages, partition) =>
          messages.length === 0
            ? Promise.resolve([])
            : producer.send({ topic, acks: -1, messages: messages.map((m) => ({ ...m, partition })) }),
        ),
      );
    }
    await Promise.all(
      MARKERS.map((key, partition) =>
        producer.send({ topic, acks: -1, messages: [{ key, value: markerValue(partition), partition }] }),
      ),
    );
    await producer.disconnect();
    log(`produced ${want} records into ${topic} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  } finally {
    await admin.disconnect();
  }
}

/** The Arrow schema a replica stages for `definition('upsert')` (src/decode/batch-columns.ts). */
export const SEED_SCHEMA = new Schema([
  ...SYSTEM_FIELDS,
  new Field('_key', new Utf8(), false),
  new Field(DELETED_COLUMN, new Bool(), false),
  new Field('n', new Int64(), true),
  new Field('body', new Utf8(), true),
]);

export function seedBatch(from: number, count: number): RecordBatch {
  const ks = Array.from({ length: count }, (_, i) => from + i);
  const columns: Data[] = [
    vectorFromArray(
      ks.map(() => SEED_TOPIC),
      new Utf8(),
    ).data[0]!,
    vectorFromArray(
      ks.map((k) => partitionOf(k, PARTITIONS)),
      new Int32(),
    ).data[0]!,
    vectorFromArray(
      ks.map((k) => BigInt(k)),
      new Int64(),
    ).data[0]!,
    vectorFromArray(
      ks.map(() => SEED_TIME),
      new Timestamp(TimeUnit.MILLISECOND),
    ).data[0]!,
    vectorFromArray(
      ks.map(() => ''),
      new Utf8(),
    ).data[0]!,
    vectorFromArray(ks.map(keyName), new Utf8()).data[0]!,
    vectorFromArray(
      ks.map(() => false),
      new Bool(),
    ).data[0]!,
    vectorFromArray(
      ks.map(() => BigInt(SEEDED_N)),
      new Int64(),
    ).data[0]!,
    vectorFromArray(
      ks.map((k) => `seeded ${keyName(k)} `.padEnd(72, '.')),
      new Utf8(),
    ).data[0]!,
  ];
  return new RecordBatch(
    SEED_SCHEMA,
    makeData({ type: new Struct(SEED_SCHEMA.fields), length: count, nullCount: 0, children: columns }),
  );
}

/**
 * A table of `keys` keys as a replica of `definition('upsert')` creates it: LanceTable in
 * upsert mode makes it (the key's primary-key metadata and BTREE), the rows go in by LanceDB
 * adds, then the replica's compaction (which builds the BTREE and the system indexes). Then the checks a replica
 * makes when it opens the table (src/lance/table-opening.ts, the start's checkTableMode and
 * checkDeclaredTypes say the same): any problem stops the bench here rather than stalling it.
 */
export async function seedTable(
  target: LanceTarget,
  keys: number,
  brokers: readonly string[],
): Promise<void> {
  const started = performance.now();
  const table = await LanceTable.connect(target, silentLogger(), { upsertKey: ['_key'] });
  await table.ensureSchema(SEED_SCHEMA);
  table.close();
  const db = await lancedb.connect(target.uri);
  const raw = await db.openTable(target.table);
  for (let from = 0; from < keys; from += 500_000) {
    const batch = seedBatch(from, Math.min(500_000, keys - from));
    await raw.add({ schema: batch.schema, batches: [batch] } as never);
  }
  raw.close();
  // The replica's own compaction: it builds the key's BTREE and the system indexes, which a
  // replica's table has from its first compaction on (a table that has run for a while).
  const compacting = await LanceTable.connect(target, silentLogger(), { upsertKey: ['_key'] });
  await compacting.optimize();
  compacting.close();
  const indexed = await db.openTable(target.table);
  const indexes = (await indexed.listIndices()).map((i) => `${i.indexType}(${i.columns.join(',')})`);
  indexed.close();
  db.close();
  const consumer = resolveConsumer(
    benchConsumer('seed-check', 'unused', '/dev/null', definition('upsert', target.uri)),
    'bench/upsert-e2e.ts',
    {},
    { brokers },
  );
  const problems = await tableOpeningProblems(target, {
    fields: consumer.fields,
    epochUnit: consumer.epochUnit,
    upsertKey: consumer.upsertKey,
  });
  if (problems.length > 0)
    throw new Error(`the seeded table would be refused: ${problems.map((p) => p.message).join('; ')}`);
  log(
    `seeded ${keys} keys in ${((performance.now() - started) / 1000).toFixed(0)} s (indexes: ${indexes.join(', ')})`,
  );
}

interface ArmSpec {
  readonly id: string;
  readonly label: string;
  readonly mode: 'upsert' | 'append';
  readonly tableKeys: number;
  readonly topic: string;
  readonly uri: string;
  readonly plan: ChangePlan;
  readonly counts: Counts;
  /** Upsert arms: the table's final state (markers apart). */
  readonly expected: ExpectedTable | undefined;
  /** Settings over `definition(mode)`: a lever arm's. */
  readonly extra?: Record<string, unknown>;
}

export interface ArmFigures {
  readonly id: string;
  readonly label: string;
  readonly tableKeys: number;
  readonly records: number;
  readonly seconds: number;
  readonly changesPerSecond: number;
  readonly mibPerSecond: number;
  readonly cpuSeconds: number;
  readonly cpuPerGiB: number;
  readonly peakRssMiB: number;
  readonly otherCoresBusy: number;
  readonly threadCpu: Record<string, number>;
  readonly phases: Record<string, number>;
  readonly stages: Record<string, number>;
  readonly check: string;
  readonly problems: string[];
  /** Compactions (`lance.optimized`) while timed, and their seconds: the first falls at random in 5 min. */
  readonly compactions?: { readonly count: number; readonly seconds: number };
}

/** Rows of the table: all, and live (upsert tables). */
async function tableCounts(table: lancedb.Table, upsert: boolean): Promise<{ rows: number; live: number }> {
  const rows = await table.countRows();
  return { rows, live: upsert ? await table.countRows(`${DELETED_COLUMN} = false`) : rows };
}

function inList(keys: readonly string[]): string {
  return `_key IN (${keys.map((k) => `'${k}'`).join(', ')})`;
}

async function runArm(a: ArmSpec, brokers: readonly string[]): Promise<ArmFigures> {
  const upsert = a.mode === 'upsert';
  const records = a.plan.keys.length + PARTITIONS;
  // What the table holds once the last change is in: the expected state and the markers.
  const want = upsert
    ? { rows: a.expected!.rows + PARTITIONS, live: a.expected!.live + PARTITIONS }
    : {
        rows: a.counts.updates + a.counts.inserts + PARTITIONS,
        live: a.counts.updates + a.counts.inserts + PARTITIONS,
      };
  const bytes = a.counts.valueBytes + MARKERS.reduce((n, _, p) => n + Buffer.byteLength(markerValue(p)), 0);
  log(`${a.id}: one replica on ${a.topic} (${a.mode})`);
  // Its warnings and errors, to say why when it exits or stalls.
  const complaints: string[] = [];
  // Every line, kept with --replica-logs DIR (where a publication's time went).
  const lines: Record<string, unknown>[] = [];
  const r = await startReplica(
    a.id,
    a.topic,
    brokers,
    { ...definition(a.mode, a.uri), ...a.extra },
    [],
    {},
    (line) => {
      lines.push(line);
      if (typeof line.level === 'number' && line.level >= 40 && complaints.length < 5)
        complaints.push(JSON.stringify({ event: line.event, msg: line.msg, err: line.err }));
    },
  );
  const { sampler } = r;
  const phases: Record<string, number> = {};
  const mark = (name: string) => (phases[name] ??= round(sampler.elapsed(), 2));
  const problems: string[] = [];
  let cpuBefore = 0;
  let threadsBefore: Record<string, number> = {};
  let doneAt: number | undefined;
  let table: lancedb.Table | undefined;
  let metrics: Sample[] = [];
  let progress = '';
  let lastProgress = sampler.elapsed();
  let lastLog = 0;
  let stopped = false;
  try {
    while (doneAt === undefined) {
      await new Promise((res) => setTimeout(res, 500));
      if (r.exited) {
        problems.push(
          `the replica exited with code ${await r.exit} before the last change was visible (${[...complaints, r.process.stderr.join('').trim().slice(-600)].join(' | ')})`,
        );
        break;
      }
      if (r.port === undefined) continue;
      const m = await scrape(r.port).catch(() => undefined);
      if (!m) continue;
      metrics = m;
      const consumed = sumOf(m, 'kafka_lance_consumed_records_total');
      const published = sumOf(m, 'kafka_lance_publications_total', { result: 'success' });
      sampler.consumed = consumed;
      if (consumed === 0) {
        // The CPU charged starts at the last poll that saw nothing consumed.
        await sampler.sampleOnce();
        cpuBefore = sampler.cpuSeconds();
        threadsBefore = await sampler.threadCpu();
        continue;
      }
      mark('firstConsumed');
      if (consumed >= records) mark('allConsumed');
      table ??= await openTable(a.uri);
      const markers = table
        ? (
            await table
              .query()
              .where(inList(MARKERS))
              .select(['_key'])
              .toArray()
              .catch(() => [])
          ).length
        : 0;
      sampler.rows = markers;
      if (markers >= PARTITIONS) {
        mark('markersVisible');
        const counts = await tableCounts(table!, upsert);
        if (counts.rows === want.rows && counts.live === want.live) doneAt = mark('lastChangeVisible');
      }
      const now = `${consumed}/${published}/${markers}`;
      if (now !== progress) {
        progress = now;
        lastProgress = sampler.elapsed();
      } else if (sampler.elapsed() - lastProgress > 300) {
        problems.push(
          `stalled: ${consumed} consumed, ${published} publications, no change for 300 s (${complaints.join(' | ')})`,
        );
        break;
      }
      if (Date.now() - lastLog > 15_000) {
        lastLog = Date.now();
        log(`  ${a.id}: ${consumed} consumed, ${published} publications, ${markers} markers visible`);
      }
    }
    // The log up to the last change visible (not the graceful stop's).
    const linesTimed = lines.length;
    metrics = (await scrape(r.port!).catch(() => undefined)) ?? metrics;
    await sampler.sampleOnce();
    const threadCpu = Object.fromEntries(
      Object.entries(await sampler.threadCpu())
        .map(([t, cpu]): [string, number] => [t, round(cpu - (threadsBefore[t] ?? 0))])
        .filter(([, s]) => s >= 0.1)
        .sort((x, y) => y[1] - x[1]),
    );
    const cpuSeconds = sampler.cpuSeconds() - cpuBefore;
    const otherCoresBusy = await sampler.otherCores();
    table?.close();
    table = undefined;
    const code = await stopReplica(r);
    stopped = true;
    if (code !== 0 && problems.length === 0) problems.push(`graceful stop exited with code ${code}`);
    const stages = stageBreakdown(metrics);
    const check = upsert
      ? await checkUpsertTable(a, want, problems)
      : await checkAppendTable(a, want.rows, stages, problems);
    const start = r.joinedAt ?? 0;
    const seconds = Math.max((doneAt ?? sampler.elapsed()) - start, 1e-3);
    const compacted = lines.slice(0, linesTimed).filter((l) => l.event === 'lance.optimized');
    phases.joined = round(start, 2);
    return {
      id: a.id,
      label: a.label,
      tableKeys: a.tableKeys,
      records,
      seconds: round(seconds),
      changesPerSecond: Math.round(records / seconds),
      mibPerSecond: round(bytes / MiB / seconds),
      cpuSeconds: round(cpuSeconds),
      cpuPerGiB: round(cpuSeconds / (bytes / 2 ** 30)),
      peakRssMiB: Math.round(sampler.peakRssBytes / MiB),
      otherCoresBusy: round(otherCoresBusy),
      threadCpu,
      phases,
      stages,
      check,
      problems,
      compactions: {
        count: compacted.length,
        seconds: round(compacted.reduce((n, l) => n + (typeof l.seconds === 'number' ? l.seconds : 0), 0)),
      },
    };
  } finally {
    table?.close();
    if (!stopped) await stopReplica(r).catch(() => undefined);
    await fsp.rm(r.work, { recursive: true, force: true }).catch(() => undefined);
    const logDir = arg('replica-logs', '');
    if (logDir)
      await fsp.writeFile(path.join(logDir, `${a.id}.jsonl`), lines.map((l) => JSON.stringify(l)).join('\n'));
  }
}

/**
 * The upsert table after the arm: its counts, its columns unchanged (the replica merged
 * into the seeded table rather than adding to its schema), and a sample of keys (changed,
 * new, seeded, the markers) each held by exactly one row with the newest value.
 */
async function checkUpsertTable(
  a: ArmSpec,
  want: { rows: number; live: number },
  problems: string[],
): Promise<string> {
  const table = await openTable(a.uri);
  if (!table) {
    problems.push('no table after the arm');
    return 'no table';
  }
  try {
    const counts = await tableCounts(table, true);
    if (counts.rows !== want.rows || counts.live !== want.live)
      problems.push(`rows ${counts.rows} (want ${want.rows}), live ${counts.live} (want ${want.live})`);
    const columns = (await table.schema()).fields.map((f) => f.name).join(',');
    if (columns !== SEED_SCHEMA.fields.map((f) => f.name).join(','))
      problems.push(`the table's columns changed: ${columns}`);
    const next = seededRandom(7);
    const sample = new Set<number>();
    for (let i = 0; i < 1_500; i++) sample.add(a.plan.keys[Math.floor(next() * a.plan.keys.length)]!);
    for (let i = 0; i < 300; i++) sample.add(Math.floor(next() * a.tableKeys));
    const keys = [...sample];
    const seen = new Map<string, { deleted: boolean; n: number | null }[]>();
    for (let i = 0; i < keys.length; i += 250) {
      const names = keys.slice(i, i + 250).map(keyName);
      const rows = await table
        .query()
        .where(inList(i === 0 ? [...names, ...MARKERS] : names))
        .select(['_key', DELETED_COLUMN, 'n'])
        .toArray();
      for (const row of rows as { _key: string; _deleted: boolean; n: bigint | null }[]) {
        const list = seen.get(row._key) ?? [];
        list.push({ deleted: row._deleted, n: row.n === null ? null : Number(row.n) });
        seen.set(row._key, list);
      }
    }
    let wrong = 0;
    const examples: string[] = [];
    const expect = (key: string, ok: (r: { deleted: boolean; n: number | null }) => boolean) => {
      const rows = seen.get(key) ?? [];
      if (rows.length === 1 && ok(rows[0]!)) return;
      wrong++;
      if (examples.length < 3) examples.push(`${key}: ${JSON.stringify(rows)}`);
    };
    for (const k of keys) {
      const newest = a.expected!.newest(k);
      expect(keyName(k), (r) =>
        newest === undefined
          ? !r.deleted && r.n === SEEDED_N
          : newest.deleted
            ? r.deleted
            : !r.deleted && r.n === newest.change,
      );
    }
    MARKERS.forEach((key, p) => expect(key, (r) => !r.deleted && r.n === -2 - p));
    if (wrong > 0) problems.push(`${wrong} sampled keys wrong, e.g. ${examples.join('; ')}`);
    return `${counts.rows.toLocaleString('en-US')} rows, ${counts.live.toLocaleString('en-US')} live (want ${want.rows.toLocaleString('en-US')}, ${want.live.toLocaleString('en-US')}); ${keys.length + PARTITIONS} sampled keys: ${wrong === 0 ? 'each once, newest value' : `${wrong} wrong`}`;
  } finally {
    table.close();
  }
}

/** The append table: every non-null record a row; the tombstones dead letters (append's default). */
async function checkAppendTable(
  a: ArmSpec,
  wantRows: number,
  stages: Record<string, number>,
  problems: string[],
): Promise<string> {
  const table = await openTable(a.uri);
  const rows = table ? await table.countRows() : 0;
  table?.close();
  if (rows !== wantRows) problems.push(`its table holds ${rows} rows, want ${wantRows}`);
  const deadLetters = stages.deadLetters ?? 0;
  if (deadLetters !== a.counts.deletes)
    problems.push(`${deadLetters} dead letters, want ${a.counts.deletes} (the tombstones)`);
  return `${rows.toLocaleString('en-US')} rows (want ${wantRows.toLocaleString('en-US')}); ${deadLetters.toLocaleString('en-US')} tombstones dead-lettered`;
}

async function main(): Promise<void> {
  const saved = arg('render', '');
  if (saved) {
    // The report again from a run's --json (its text changed, not its figures).
    const { facts, results } = JSON.parse(await fsp.readFile(saved, 'utf8')) as {
      facts: RunFacts;
      results: ArmFigures[];
    };
    return writeReports(render(results, facts));
  }
  const sizes = arg('keys', '1000000,10000000').split(',').map(Number);
  const count = Number(arg('changes', '1000000'));
  const dir = arg('dir', path.join(os.tmpdir(), 'kl-upsert-e2e'));
  const broker = ensureBroker(log);
  const brokers = broker.brokers;
  await fsp.rm(dir, { recursive: true, force: true });
  await fsp.mkdir(dir, { recursive: true });
  const arms: ArmSpec[] = [];
  try {
    for (const keys of sizes) {
      const plan = changePlan(keys, count);
      const counts = planCounts(plan);
      const topic = `bench-upserts-${keys}-${count}`;
      await produceChanges(brokers, topic, plan);
      const uri = path.join(dir, `upsert-${keys}`);
      await seedTable({ uri, table: TABLE }, keys, brokers);
      arms.push({
        id: `upsert-${keys}`,
        label: `upsert into ${keys.toLocaleString('en-US')} keys`,
        mode: 'upsert',
        tableKeys: keys,
        topic,
        uri,
        plan,
        counts,
        expected: expectedTable(plan),
      });
    }
    const largest = arms.at(-1)!;
    arms.push({
      ...largest,
      id: 'append',
      label: `append, the ${largest.tableKeys.toLocaleString('en-US')}-key topic, fresh table`,
      mode: 'append',
      tableKeys: 0,
      uri: path.join(dir, 'append'),
      expected: undefined,
    });
    // The lever, last: fewer, larger publications, each merge's join reading the whole table
    // once (its source reservation at twice the publication, as the option's check requires).
    const leverMiB = Number(arg('lever-publication-mib', '128'));
    if (leverMiB > 0) {
      const uri = path.join(dir, 'lever');
      await fsp.cp(largest.uri, uri, { recursive: true });
      arms.push({
        ...largest,
        id: `lever-${largest.tableKeys}`,
        label: `upsert into ${largest.tableKeys.toLocaleString('en-US')} keys, \`materializer.maxPublicationBytes\` ${leverMiB} MiB`,
        uri,
        extra: {
          materializer: { maxPublicationBytes: leverMiB * MiB, sourceReservationBytes: 2 * leverMiB * MiB },
        },
      });
    }
    const results: ArmFigures[] = [];
    for (const a of arms) {
      const result = await runArm(a, brokers);
      results.push(result);
      log(
        `${a.id}: ${result.changesPerSecond} changes/s, ${result.cpuPerGiB} CPU s/GiB, ${result.check}` +
          (result.problems.length ? `, PROBLEMS: ${result.problems.join('; ')}` : ''),
      );
      await fsp.rm(a.uri, { recursive: true, force: true });
    }
    const command = `node dist/bench/upsert-e2e.js ${process.argv.slice(2).join(' ')}`.trim();
    const facts: RunFacts = {
      command,
      date: new Date().toISOString(),
      count,
      counts: arms[0]!.counts,
      tableKeys: sizes,
    };
    const json = arg('json', '');
    if (json) await fsp.writeFile(json, JSON.stringify({ facts, results }, null, 1));
    await writeReports(render(results, facts));
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
    broker.stop();
  }
}

async function writeReports(text: string): Promise<void> {
  console.log(text);
  for (const file of [arg('report', ''), arg('bench-report', '')].filter(Boolean)) {
    const previous = await fsp.readFile(file, 'utf8').catch(() => '');
    await fsp.writeFile(file, withSection(previous, 'e2e-upsert', text));
    log(`report: ${file}`);
  }
}

/** What the report says about the run besides the arms' figures (kept with them by --json). */
interface RunFacts {
  readonly command: string;
  readonly date: string;
  readonly count: number;
  readonly counts: Counts;
  readonly tableKeys: readonly number[];
}

function render(results: readonly ArmFigures[], run: RunFacts): string {
  const upserts = results.filter((r) => r.id.startsWith('upsert-'));
  const small = upserts[0];
  const large = upserts.length > 1 ? upserts.at(-1) : undefined;
  const lever = results.find((r) => r.id.startsWith('lever-'));
  const append = results.find((r) => r.id === 'append');
  const ratio = (x: ArmFigures | undefined, y: ArmFigures | undefined) =>
    x && y ? x.changesPerSecond / y.changesPerSecond : NaN;
  const growth = ratio(large, small);
  const vsAppend = ratio(large, append);
  const counts = run.counts;
  const keysOf = (r: ArmFigures | undefined) => r?.tableKeys.toLocaleString('en-US') ?? '?';
  // NaN: an arm missing (one table size asked).
  const verdict = (x: number) => (Number.isNaN(x) ? 'n/a' : x >= 0.5 ? 'PASS' : 'FAIL');
  const failed = results.filter((r) => r.problems.length > 0);
  return [
    '## Upsert mode end to end (`e2e-upsert`)',
    '',
    `Generated by \`${run.command}\` (bench/upsert-e2e.ts) on ${run.date} (${os.availableParallelism()} cores, Node ${process.version}, broker on the same machine, shared with other work: "other cores busy" is the CPU the rest of the machine used meanwhile).`,
    '',
    `A topic per table size of ${run.count.toLocaleString('en-US')} keyed change records, 6 partitions (a key always in one), ~${Math.round(counts.valueBytes / (counts.updates + counts.inserts))}-byte JSON values \`{n, body}\`: ${counts.updates.toLocaleString('en-US')} updates of seeded keys, ${counts.inserts.toLocaleString('en-US')} new keys, ${counts.deletes.toLocaleString('en-US')} tombstones (null values), drawn uniformly over the table's keys in one seeded order (bench/lib/upsert-changes.ts), then one marker record last in each partition. The tables (${run.tableKeys.map((k) => k.toLocaleString('en-US')).join(' and ')} keys) are seeded as a replica of this definition creates them (LanceTable in upsert mode: primary key \`_key\`, its BTREE; then compacted) and pass the replica's opening checks. One replica per arm, \`bin/kafka-lance run\` with defaults but \`mode: 'upsert'\`, \`key: 'record-key'\`, \`keyFormat: 'string'\` (append: \`includeKey: true\`; its tombstones are dead letters, append's default \`tombstones\`). Timed from the group join to the last change visible: every partition's marker row readable AND the table's row counts (all rows, and \`_deleted = false\`) at their final values. CPU: the replica's process tree from /proc, from the last poll with nothing consumed to that moment; per GiB of the change values' bytes (tombstones: none). Then each upsert table is checked: counts, its columns unchanged, and a sample of keys each held by one row with its newest value.`,
    '',
    '| arm | changes/s | MiB/s | timed s | CPU s | CPU s / GiB | peak RSS MiB | other cores busy | publications (write s, prepare s) | check |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...results.map(
      (r) =>
        `| ${r.label} | ${r.changesPerSecond.toLocaleString('en-US')} | ${r.mibPerSecond} | ${r.seconds} | ${r.cpuSeconds} | ${r.cpuPerGiB} | ${r.peakRssMiB} | ${r.otherCoresBusy} | ${r.stages.publications} (${r.stages.publicationWriteSeconds}, ${r.stages.publicationPrepareSeconds}) | ${r.problems.length ? `FAIL: ${r.problems.join('; ')}` : r.check} |`,
    ),
    '',
    `- ${verdict(growth)}: upsert into ${keysOf(large)} keys ≥ 0.5 × into ${keysOf(small)} keys (${growth.toFixed(2)}×)`,
    `- ${verdict(vsAppend)}: upsert into ${keysOf(large)} keys ≥ 0.5 × append mode on the same records (${vsAppend.toFixed(2)}×)`,
    ...(failed.length ? [`- checks FAILED: ${failed.map((r) => r.id).join(', ')}`] : []),
    ...(lever && large
      ? [
          `- lever (not a target arm): ${lever.label}: ${ratio(lever, large).toFixed(2)}× the default's changes/s, ${lever.stages.publications} publications against ${large.stages.publications}, peak RSS ${lever.peakRssMiB} MiB against ${large.peakRssMiB}`,
        ]
      : []),
    '',
    "Where the time goes (s after the join): every record consumed (staged durably, offsets committed), the last change visible, the publications' Lance writes summed (the merges, one at a time), and the compactions that ran meanwhile (a replica's first one falls at random within `materializer.optimizeEveryMs`, 5 min: in an arm or not):",
    '',
    ...results.map((r) => {
      const after = (phase: string) =>
        r.phases[phase] === undefined ? '?' : round(r.phases[phase] - (r.phases.joined ?? 0), 1);
      const compactions = r.compactions
        ? `; ${r.compactions.count} compaction${r.compactions.count === 1 ? '' : 's'} (${r.compactions.seconds} s)`
        : '';
      return `- ${r.id}: consumed ${after('allConsumed')}, visible ${after('lastChangeVisible')}; writes ${r.stages.publicationWriteSeconds} s, preparation ${r.stages.publicationPrepareSeconds} s${compactions}`;
    }),
    '',
    'CPU s per thread of the replica, and its phases (s since spawn):',
    '',
    ...results.map(
      (r) =>
        `- ${r.id}: ${Object.entries(r.threadCpu)
          .map(([t, s]) => `${t} ${s}`)
          .join(
            ', ',
          )}; phases ${JSON.stringify(r.phases)}; source wait ${r.stages.sourceWaitSeconds} s, fetch permit wait ${r.stages.fetchPermitWaitSeconds} s`,
    ),
  ].join('\n');
}

if (require.main === module) void main();
