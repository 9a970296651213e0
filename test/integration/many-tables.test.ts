import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { Field, Int64, Schema, Table as ArrowTable, vectorFromArray } from 'apache-arrow';
import type { InspectReport } from '../../src/cli/inspect';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { produceRecords, waitForCommittedAtEnd, writeConsumer } from '../support/ingestion-fixture';
import { testBrokers } from '../support/kafka';
import { tempDir } from '../support/rows';
import { runBounded } from '../support/run-bounded';
import { openTableIfCommitted } from '../../src/lance/open-if-committed';

/**
 * One materializer worker publishing many tables, through a real replica on the real
 * broker and real Lance tables. The staging half that routes records to tables is not
 * this suite's: a replica first stages a topic into its table's directory (publication
 * off), and its sealed parts are copied into more table directories, as routing would
 * have staged them (`<dataDir>/staging/<table>`). A replica started on that data
 * directory then serves every table from its one worker.
 */
const suite = brokerSuite('kl-tables');
const BIN = path.resolve(__dirname, '../../bin/kafka-lance');
const cli = (...args: string[]) => runBounded(process.execPath, [BIN, ...args]);

const RECORDS = 3_000;
const PARTITIONS = 2;

async function tableRows(
  lanceDir: string,
  table: string,
): Promise<{ partition: number; offset: number; n: number }[]> {
  const db = await lancedb.connect(lanceDir, { readConsistencyInterval: 0 });
  try {
    const t = await openTableIfCommitted(db, table);
    if (!t) return [];
    const rows = (await t.query().select(['_partition', '_offset', 'n']).toArray()) as {
      _partition: number;
      _offset: bigint;
      n: bigint;
    }[];
    t.close();
    return rows.map((r) => ({ partition: r._partition, offset: Number(r._offset), n: Number(r.n) }));
  } finally {
    db.close();
  }
}

async function rowCount(lanceDir: string, table: string): Promise<number> {
  const db = await lancedb.connect(lanceDir, { readConsistencyInterval: 0 });
  try {
    const t = await db.openTable(table);
    const n = await t.countRows();
    t.close();
    return n;
  } finally {
    db.close();
  }
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 180_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

test('three tables published from one worker, each record once in each; a poisoned table beside them stalls alone; inspect and compact over every table', async () => {
  const definition = {
    durabilityIntervalMs: 200,
    staging: { maxPartAgeMs: 500 },
    materializer: { enabled: false },
  };
  const { topic, groupId, file } = await topicAndConsumer(suite, PARTITIONS, definition);
  const produced = await produceRecords(suite.kafka, topic, PARTITIONS, RECORDS);
  const dataDir = await tempDir('kl-tables-replica');
  const lanceDir = path.join(dataDir, 'lance');
  const staging = (table: string) => path.join(dataDir, 'staging', table);

  // 1. Stage the topic into "logs" and commit it, publishing nothing.
  const stager = new ReplicaProcess(file, dataDir, testBrokers());
  await waitForCommittedAtEnd(suite.admin, groupId, topic);
  expect(await stager.stop()).toEqual({ code: 0, signal: null });
  const parts = (await fsp.readdir(staging('logs'))).filter((n) => n.endsWith('.arrows'));
  expect(parts.length).toBeGreaterThan(0);

  // 2. The same parts in more tables' directories, as routing would have staged them; and a
  //    "poisoned" table whose existing Lance table has `message` as int64 (declared: string).
  for (const table of ['logs_eu', 'logs_us', 'poisoned']) {
    await fsp.mkdir(staging(table), { recursive: true });
    for (const p of parts) await fsp.copyFile(path.join(staging('logs'), p), path.join(staging(table), p));
  }
  const db = await lancedb.connect(lanceDir);
  const poisoned = await db.createTable(
    'poisoned',
    new ArrowTable(
      new Schema([new Field('_offset', new Int64(), false), new Field('message', new Int64(), true)]),
      {
        _offset: vectorFromArray([0n], new Int64()),
        message: vectorFromArray([7n], new Int64()),
      },
    ),
  );
  poisoned.close();
  db.close();

  // 3. One replica, publication on: its worker serves the four tables.
  await writeConsumer(suite.work, {
    ...(JSON.parse(await fsp.readFile(file, 'utf8')) as Record<string, unknown>),
    materializer: { enabled: true, maxPublicationDelayMs: 200, pollMs: 200, maxPublicationBytes: 64 * 1024 },
  });
  const replica = new ReplicaProcess(file, dataDir, testBrokers());
  await replica.waitReady();
  for (const table of ['logs', 'logs_eu', 'logs_us'])
    await until(
      `${RECORDS} rows in ${table}`,
      async () => (await tableRows(lanceDir, table)).length >= RECORDS,
    );
  const stalled = await replica.waitFor((l) => l.event === 'table.stalled');
  await until('the stalled gauges', async () => {
    const samples = await replica.metrics();
    const gauge = (table: string) =>
      samples.find((s) => s.name === 'kafka_lance_table_stalled' && s.labels.table === table)?.value;
    return gauge('poisoned') === 1 && gauge('logs_eu') === 0 && gauge('logs') === 0;
  });
  const samples = await replica.metrics();
  const published = (table: string) =>
    samples.find((s) => s.name === 'kafka_lance_published_records_total' && s.labels.table === table)?.value;
  expect([published('logs'), published('logs_eu'), published('logs_us')]).toEqual([
    RECORDS,
    RECORDS,
    RECORDS,
  ]);

  // Each table: every produced record exactly once, with its value.
  const want = produced
    .map((p) => `${p.partition}:${p.offset}:${(JSON.parse(p.value) as { n: number }).n}`)
    .sort();
  for (const table of ['logs', 'logs_eu', 'logs_us']) {
    const got = (await tableRows(lanceDir, table)).map((r) => `${r.partition}:${r.offset}:${r.n}`).sort();
    expect([table, got.length, new Set(got).size]).toEqual([table, RECORDS, RECORDS]);
    expect(got).toEqual(want);
  }
  // The poisoned table: one line naming it and the field, its rows not published, its parts kept.
  expect(replica.logs.filter((l) => l.event === 'table.stalled')).toHaveLength(1);
  expect(stalled).toMatchObject({ table: 'poisoned', reason: 'refused', fields: ['schema.fields.message'] });
  expect(await rowCount(lanceDir, 'poisoned')).toBe(1); // only the row it was created with
  expect((await fsp.readdir(staging('poisoned'))).filter((n) => n.endsWith('.arrows'))).toEqual(parts.sort());
  expect(await replica.stop()).toEqual({ code: 0, signal: null });

  // 4. inspect lists every table with what waits in it and its last commit.
  const out = cli(
    'inspect',
    '-c',
    file,
    '--data-dir',
    dataDir,
    '--brokers',
    testBrokers().join(','),
    '--json',
  );
  expect([out.status, out.stderr]).toEqual([0, '']);
  const report = JSON.parse(out.stdout) as InspectReport;
  const byTable = new Map(report.tables.map((t) => [t.table, t]));
  expect([...byTable.keys()]).toEqual(['logs', 'logs_eu', 'logs_us', 'poisoned']);
  for (const table of ['logs', 'logs_eu', 'logs_us'])
    expect(byTable.get(table)).toMatchObject({
      exists: true,
      rows: RECORDS,
      waitingParts: 0,
      plannedRows: 0,
    });
  expect(byTable.get('poisoned')).toMatchObject({ exists: true, rows: 1, waitingParts: parts.length });
  expect(Date.parse(byTable.get('logs_eu')!.lastCommitAt!)).toBeGreaterThan(Date.now() - 600_000);
  const human = cli('inspect', '-c', file, '--data-dir', dataDir, '--brokers', testBrokers().join(','));
  expect(human.stdout).toMatch(/Tables \(4\)/);
  expect(human.stdout).toMatch(/poisoned +1 +\d+ \(/);

  // 5. compact: one table by name, or every table.
  const one = cli('compact', '-c', file, '--data-dir', dataDir, '--table', 'logs_eu');
  expect([one.status, one.stderr]).toEqual([0, '']);
  expect(one.stdout.match(/^Lance table \S+/gm)).toEqual(['Lance table logs_eu']);
  const all = cli('compact', '-c', file, '--data-dir', dataDir);
  expect([all.status, all.stderr]).toEqual([0, '']);
  expect(all.stdout.match(/^Lance table \S+/gm)).toEqual([
    'Lance table logs',
    'Lance table logs_eu',
    'Lance table logs_us',
    'Lance table poisoned',
  ]);
  expect(all.stdout).toContain('compacted 4 tables of 4');
  const escape = cli('compact', '-c', file, '--data-dir', dataDir, '--table', '../elsewhere');
  expect(escape.status).not.toBe(0);
  expect(escape.stderr).toContain('--table "../elsewhere" is not a table name');
  // Compaction changed no rows.
  for (const table of ['logs', 'logs_eu', 'logs_us'])
    expect(await tableRows(lanceDir, table)).toHaveLength(RECORDS);
  await fsp.rm(dataDir, { recursive: true, force: true });
}, 600_000);
