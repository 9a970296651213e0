import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import {
  debeziumSuite,
  difference,
  dropConnector,
  rowsWithSequence,
  sql,
  startConnector,
  valuesHolding,
} from '../support/debezium-local';
import { sleep, until } from '../support/faults';
import { waitForCommittedAtEnd } from '../support/ingestion-fixture';
import { testBrokers, uniqueName } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { openTableIfCommitted } from '../../src/lance/open-if-committed';

/**
 * A real Debezium: PostgreSQL (Debian's package, wal_level=logical) and Kafka Connect in
 * standalone mode with Debezium's PostgreSQL connector 3.6.1.Final (deploy/debezium-local,
 * Maven Central jars) against the test broker. A workload of inserts, updates (of the
 * primary key too, which Debezium sends as a delete and a create), deletes, multi-row
 * transactions and a TOASTed text column left unchanged by updates runs while a replica
 * consumes and is SIGKILLed; after it drains, the Lance table equals
 * `SELECT * FROM t ORDER BY id`, row for row, with REPLICA IDENTITY FULL and with DEFAULT
 * (where the unchanged TOASTed column arrives as Debezium's placeholder). Run after
 * `npm run build`.
 */
const suite = brokerSuite('kl-debezium');
debeziumSuite();

interface SourceRow {
  readonly id: number;
  readonly name: string;
  readonly note: string | null;
}

/** The source table, ordered by id. */
function sourceRows(table: string): SourceRow[] {
  const text = sql(`SELECT coalesce(json_agg(t ORDER BY id), '[]') FROM ${table} t`).trim();
  return JSON.parse(text) as SourceRow[];
}

async function lanceRows(lanceDir: string): Promise<SourceRow[] | undefined> {
  const db = await lancedb.connect(lanceDir, { readConsistencyInterval: 0 });
  try {
    const opened = await openTableIfCommitted(db, 'logs');
    if (!opened) return undefined;
    const rows = (await opened
      .query()
      .where('_deleted = false')
      .select(['id', 'name', 'note'])
      .toArray()) as { id: bigint; name: string; note: string | null }[];
    return rows.map((r) => ({ id: Number(r.id), name: r.name, note: r.note })).sort((a, b) => a.id - b.id);
  } finally {
    db.close();
  }
}

/** Waits until the Lance table equals the PostgreSQL table, naming the first difference if it never does. */
async function untilEqual(
  lanceDir: string,
  source: readonly SourceRow[],
  replica: ReplicaProcess,
): Promise<void> {
  let last: string | undefined;
  await until(
    'the Lance table to equal the PostgreSQL table',
    async () => {
      last = difference(await lanceRows(lanceDir), source);
      return last === undefined ? true : undefined;
    },
    240_000,
    1_000,
  ).catch((error: unknown) => {
    throw new Error(`${String(error)}; ${last}; replica:\n${replica.tail(10)}`);
  });
}

// FULL: every update carries the whole row; a key's records are ordered by source.lsn.
// DEFAULT: an update leaving a TOASTed note alone carries Debezium's placeholder for it, and
// the table keeps the stored note; a key's records are ordered by their Kafka position.
test.each(['FULL', 'DEFAULT'] as const)(
  'a PostgreSQL table with REPLICA IDENTITY %s mirrored through Debezium, the replica SIGKILLed mid-run, equals SELECT * FROM t ORDER BY id',
  async (identity) => {
    const name = uniqueName('t').replace(/-/g, '_');
    const prefix = uniqueName('dbz').replace(/-/g, '_');
    const topic = `${prefix}.public.${name}`;
    // A TOASTed note: 12.8 kB stored out of line (STORAGE EXTERNAL: not compressed, which
    // would keep this repeated text inline; out of line above the 2 kB threshold).
    const big = 'repeat(md5(random()::text), 400)';
    sql(
      `CREATE TABLE ${name} (id int PRIMARY KEY, name text NOT NULL, note text);
     ALTER TABLE ${name} REPLICA IDENTITY ${identity};
     ALTER TABLE ${name} ALTER COLUMN note SET STORAGE EXTERNAL;
     INSERT INTO ${name} SELECT g, 'snap ' || g, CASE WHEN g % 5 = 0 THEN ${big} WHEN g % 3 = 0 THEN NULL ELSE 'n' || g END
       FROM generate_series(1, 300) g;`,
    );
    await startConnector(suite.admin, prefix, name, 3);
    const lanceDir = path.join(suite.work, `${uniqueName('debezium')}-lance`);
    const c = await topicAndConsumer(suite, 1, {
      topics: [topic],
      schema: { fields: { id: 'int64', name: 'string', note: 'string' } },
      mode: 'upsert',
      key: { fields: ['id'] },
      envelope: 'debezium',
      // FULL orders a key's records by PostgreSQL's LSN first; DEFAULT by the Kafka position.
      ...(identity === 'FULL' ? { sequence: 'source.lsn' } : {}),
      lance: { uri: lanceDir },
      staging: { maxPartAgeMs: 300 },
      materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
    });
    const dataDir = await fsp.mkdtemp(path.join(suite.work, 'data-debezium-'));
    const first = new ReplicaProcess(c.file, dataDir, testBrokers());
    await first.waitReady();
    // Rounds of transactions: updates (some leave the TOASTed note alone), deletes, new rows,
    // primary-key changes, several rows per transaction.
    // DEFAULT: a primary-key update of a row with a TOASTed note sends the placeholder in the new
    // key's create, whose value only the old row held: a dead letter (docs/upserts-and-cdc.md).
    const movable = identity === 'DEFAULT' ? ' AND coalesce(length(note), 0) < 2000' : '';
    const workload = async (from: number, to: number) => {
      for (let round = from; round < to; round++) {
        sql(
          `BEGIN;
         UPDATE ${name} SET name = 'upd ' || id || '/${round}' WHERE id % 7 = ${round % 7};
         UPDATE ${name} SET note = 'note ' || id || '/${round}' WHERE id % 11 = ${round % 11} AND id % 5 <> 0;
         DELETE FROM ${name} WHERE id % 13 = ${round % 13} AND id < 300;
         INSERT INTO ${name} SELECT g, 'new ' || g, CASE WHEN g % 2 = 0 THEN ${big} END
           FROM generate_series(${1000 + round * 20}, ${1000 + round * 20 + 9}) g;
         UPDATE ${name} SET id = id + 100000 WHERE id = (SELECT min(id) FROM ${name} WHERE id < 100000 AND id % 17 = ${round % 17}${movable});
         COMMIT;`,
        );
        await sleep(100);
      }
    };
    await workload(0, 6);
    await first.kill('SIGKILL');
    await workload(6, 10);
    const second = new ReplicaProcess(c.file, dataDir, testBrokers());
    await second.waitReady();
    await workload(10, 14);
    const source = sourceRows(name);
    expect(source.some((r) => (r.note?.length ?? 0) > 10_000)).toBe(true);
    await untilEqual(lanceDir, source, second);
    await waitForCommittedAtEnd(suite.admin, c.groupId, topic);
    // The DEFAULT run's updates of names left TOASTed notes alone: the placeholder was sent
    // (FULL: PostgreSQL logs the old row whole, and Debezium takes the value from it).
    const placeholders = await valuesHolding(suite.admin, topic, '__debezium_unavailable_value');
    if (identity === 'DEFAULT') expect(placeholders).toBeGreaterThan(0);
    else expect(await rowsWithSequence(lanceDir)).toBe(source.length);
    expect((await second.stop()).code).toBe(0);
    // Nothing was set aside: no placeholder, no truncate, no undecodable event.
    const deadLetters = await fsp
      .readFile(path.join(suite.work, `${c.name}.dlq.jsonl`), 'utf8')
      .catch(() => '');
    expect(deadLetters).toBe('');
    await dropConnector(prefix, name);
  },
  600_000,
);

test('truncates of the PostgreSQL table (skipped.operations none) empty the Lance table of the rows before them, the replica SIGKILLed between, and it equals SELECT * FROM t ORDER BY id', async () => {
  const name = uniqueName('t').replace(/-/g, '_');
  const prefix = uniqueName('dbz').replace(/-/g, '_');
  const topic = `${prefix}.public.${name}`;
  sql(
    `CREATE TABLE ${name} (id int PRIMARY KEY, name text NOT NULL, note text);
     INSERT INTO ${name} SELECT g, 'snap ' || g, 'n' || g FROM generate_series(1, 100) g;`,
  );
  // One partition: a truncate has no key, and Debezium orders it against the rows only within
  // one partition (docs/upserts-and-cdc.md).
  await startConnector(suite.admin, prefix, name, 1, { 'skipped.operations': 'none' });
  const lanceDir = path.join(suite.work, `${uniqueName('debezium-truncate')}-lance`);
  const c = await topicAndConsumer(suite, 1, {
    topics: [topic],
    schema: { fields: { id: 'int64', name: 'string', note: 'string' } },
    mode: 'upsert',
    key: { fields: ['id'] },
    envelope: 'debezium',
    truncate: 'apply',
    lance: { uri: lanceDir },
    staging: { maxPartAgeMs: 300 },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const dataDir = await fsp.mkdtemp(path.join(suite.work, 'data-debezium-truncate-'));
  const first = new ReplicaProcess(c.file, dataDir, testBrokers());
  await first.waitReady();
  // Rows before and after each truncate; some keys come back after it, some are updated
  // in the transaction right before it.
  const round = (r: number) =>
    sql(
      `UPDATE ${name} SET name = 'upd ' || id || '/${r}' WHERE id % 3 = ${r % 3};
       INSERT INTO ${name} SELECT g, 'new ' || g || '/${r}', 'n' FROM generate_series(${200 + r * 10}, ${209 + r * 10}) g;
       BEGIN; UPDATE ${name} SET note = 'before truncate ${r}' WHERE id % 4 = 0; COMMIT;
       TRUNCATE ${name};
       INSERT INTO ${name} SELECT g, 'after ' || g || '/${r}', 'n' || g FROM generate_series(${r * 7}, ${r * 7 + 30}) g;
       UPDATE ${name} SET note = 'updated after ${r}' WHERE id % 5 = 0;`,
    );
  round(1);
  await sleep(500);
  await first.kill('SIGKILL');
  round(2);
  const second = new ReplicaProcess(c.file, dataDir, testBrokers());
  await second.waitReady();
  round(3);
  const source = sourceRows(name);
  expect(source.length).toBeGreaterThan(0);
  await untilEqual(lanceDir, source, second);
  await waitForCommittedAtEnd(suite.admin, c.groupId, topic);
  expect(await valuesHolding(suite.admin, topic, '"op":"t"')).toBe(3);
  expect((await second.stop()).code).toBe(0);
  const deadLetters = await fsp
    .readFile(path.join(suite.work, `${c.name}.dlq.jsonl`), 'utf8')
    .catch(() => '');
  expect(deadLetters).toBe('');
  await dropConnector(prefix, name);
}, 600_000);
