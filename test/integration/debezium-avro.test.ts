import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { plainColumn } from '../support/avro-fixtures';
import {
  avroConverters,
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
import { TEST_SCHEMA_REGISTRY_PORT, schemaRegistrySuite } from '../support/schema-registry-local';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { openTableIfCommitted } from '../../src/lance/open-if-committed';

/**
 * A real Debezium writing Avro: PostgreSQL and Kafka Connect with Debezium's PostgreSQL
 * connector (deploy/debezium-local), its keys and values converted by Apicurio's AvroConverter
 * into the local Schema Registry (deploy/schema-registry-local) in the Confluent wire format.
 * The table's columns come from the envelope's `after` record: an int key, a numeric(12,2) and
 * a numeric without precision (Debezium's VariableScaleDecimal, as exact text),
 * a timestamp and a timestamptz (Debezium's MicroTimestamp and ZonedTimestamp), and a TOASTed
 * text that updates leave alone (REPLICA IDENTITY DEFAULT: Debezium's placeholder, the stored
 * value kept), a key's records ordered by `source.lsn`. Inserts, updates, deletes, primary-key updates and multi-row transactions run
 * while a replica consumes and is SIGKILLed; after it drains, the Lance table equals
 * `SELECT * FROM t ORDER BY id`, row for row, every value exact. Run after `npm run build`.
 */
const suite = brokerSuite('kl-debezium-avro');
const registry = schemaRegistrySuite();
debeziumSuite();

/**
 * A row as both sides print it: decimals as text at their scale (a numeric without precision
 * without trailing zeros: Debezium sends its value, not PostgreSQL's display scale), timestamps
 * as epoch µs.
 */
interface SourceRow {
  readonly id: number;
  readonly name: string;
  readonly amount: string | null;
  readonly ratio: string | null;
  readonly created: string | null;
  readonly createdz: string | null;
  readonly note: string | null;
}

/** A decimal's text without trailing fractional zeros: "198.000" → "198", "-0.50" → "-0.5". */
const valueOf = (text: string | null) => (text?.includes('.') ? text.replace(/\.?0+$/, '') : text);

function sourceRows(table: string): SourceRow[] {
  const text = sql(
    `SELECT coalesce(json_agg(json_build_object(
       'id', id, 'name', name, 'amount', amount::text, 'ratio', ratio::text,
       'created', (extract(epoch FROM created) * 1000000)::bigint::text,
       'createdz', (extract(epoch FROM createdz) * 1000000)::bigint::text,
       'note', note) ORDER BY id), '[]') FROM ${table}`,
  ).trim();
  return (JSON.parse(text) as SourceRow[]).map((r) => ({ ...r, ratio: valueOf(r.ratio) }));
}

async function lanceRows(lanceDir: string): Promise<SourceRow[] | undefined> {
  const db = await lancedb.connect(lanceDir, { readConsistencyInterval: 0 });
  try {
    const opened = await openTableIfCommitted(db, 'logs');
    if (!opened) return undefined;
    const table = await opened
      .query()
      .where('_deleted = false')
      .select(['id', 'name', 'amount', 'ratio', 'created', 'createdz', 'note'])
      .toArrow();
    const columns = Object.fromEntries(
      ['id', 'name', 'amount', 'ratio', 'created', 'createdz', 'note'].map((c) => [c, plainColumn(table, c)]),
    );
    const text = (v: unknown) => (v === null ? null : `${v as string | bigint}`);
    return Array.from({ length: table.numRows }, (_, i) => ({
      id: Number(columns.id![i]),
      name: columns.name![i] as string,
      amount: text(columns.amount![i]),
      ratio: valueOf(text(columns.ratio![i])),
      created: text(columns.created![i]),
      createdz: text(columns.createdz![i]),
      note: columns.note![i] as string | null,
    })).sort((a, b) => a.id - b.id);
  } finally {
    db.close();
  }
}

test('a PostgreSQL table mirrored through Debezium with Avro keys and values in the registry, the replica SIGKILLed mid-run, equals SELECT * FROM t ORDER BY id, decimals and timestamps exact', async () => {
  const name = uniqueName('t').replace(/-/g, '_');
  const prefix = uniqueName('dbza').replace(/-/g, '_');
  const topic = `${prefix}.public.${name}`;
  // A TOASTed note: 12.8 kB stored out of line, uncompressed (debezium.test.ts says why).
  const big = 'repeat(md5(random()::text), 400)';
  sql(
    `CREATE TABLE ${name} (id int PRIMARY KEY, name text NOT NULL, amount numeric(12,2), ratio numeric,
       created timestamp, createdz timestamptz, note text);
     ALTER TABLE ${name} ALTER COLUMN note SET STORAGE EXTERNAL;
     INSERT INTO ${name} SELECT g, 'snap ' || g,
       CASE WHEN g % 4 = 0 THEN NULL ELSE (g * 1234.56 - 99999.99)::numeric(12,2) END,
       CASE WHEN g % 9 = 0 THEN NULL ELSE g / 7.0 END,
       CASE WHEN g % 6 = 0 THEN NULL ELSE timestamp '2024-02-29 23:59:59.123456' + g * interval '1 day 1.000001 s' END,
       timestamptz '1969-12-31 23:00:00.000001+02' + g * interval '7 hours',
       CASE WHEN g % 5 = 0 THEN ${big} WHEN g % 3 = 0 THEN NULL ELSE 'n' || g END
       FROM generate_series(1, 200) g;`,
  );
  await startConnector(
    suite.admin,
    prefix,
    name,
    3,
    avroConverters(`http://127.0.0.1:${TEST_SCHEMA_REGISTRY_PORT}/apis/registry/v2`),
  );
  const lanceDir = path.join(suite.work, `${uniqueName('debezium-avro')}-lance`);
  const c = await topicAndConsumer(suite, 1, {
    topics: [topic],
    format: 'avro',
    keyFormat: 'avro',
    schemaRegistry: { url: registry.url },
    schema: 'infer',
    mode: 'upsert',
    key: { fields: ['id'] },
    envelope: 'debezium',
    // A key's records ordered by PostgreSQL's LSN first: an Avro long, staged exactly in `_sequence`.
    sequence: 'source.lsn',
    lance: { uri: lanceDir },
    staging: { maxPartAgeMs: 300 },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const dataDir = await fsp.mkdtemp(path.join(suite.work, 'data-debezium-avro-'));
  const first = new ReplicaProcess(c.file, dataDir, testBrokers());
  await first.waitReady();
  // Rounds of transactions: updates of names leave the TOASTed notes alone (the placeholder),
  // amounts and times change, rows are deleted and created, a primary key changes (of a row
  // whose note is not TOASTed: the create of the new key would carry the placeholder).
  const workload = async (from: number, to: number) => {
    for (let round = from; round < to; round++) {
      sql(
        `BEGIN;
         UPDATE ${name} SET name = 'upd ' || id || '/${round}' WHERE id % 7 = ${round % 7};
         UPDATE ${name} SET amount = -amount - 0.01, ratio = ratio * -3, created = created + interval '1.5 ms'
           WHERE id % 5 = ${round % 5};
         UPDATE ${name} SET note = 'note ' || id || '/${round}', createdz = now() WHERE id % 11 = ${round % 11} AND id % 5 <> 0;
         DELETE FROM ${name} WHERE id % 13 = ${round % 13} AND id < 200;
         INSERT INTO ${name} SELECT g, 'new ' || g, 0.01 * g, -g * 0.50, timestamp '1999-12-31 23:59:59.999999', NULL,
           CASE WHEN g % 2 = 0 THEN ${big} END
           FROM generate_series(${1000 + round * 20}, ${1000 + round * 20 + 9}) g;
         UPDATE ${name} SET id = id + 100000 WHERE id = (SELECT min(id) FROM ${name}
           WHERE id < 100000 AND id % 17 = ${round % 17} AND coalesce(length(note), 0) < 2000);
         COMMIT;`,
      );
      await sleep(100);
    }
  };
  await workload(0, 5);
  await first.kill('SIGKILL');
  await workload(5, 8);
  const second = new ReplicaProcess(c.file, dataDir, testBrokers());
  await second.waitReady();
  await workload(8, 11);
  const source = sourceRows(name);
  expect(source.some((r) => (r.note?.length ?? 0) > 10_000)).toBe(true);
  expect(source.some((r) => r.amount?.startsWith('-'))).toBe(true);
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
    throw new Error(`${String(error)}; ${last}; replica:\n${second.tail(10)}`);
  });
  await waitForCommittedAtEnd(suite.admin, c.groupId, topic);
  expect(await rowsWithSequence(lanceDir)).toBe(source.length);
  // Updates of names left TOASTed notes alone: Debezium sent its placeholder for them.
  expect(await valuesHolding(suite.admin, topic, '__debezium_unavailable_value')).toBeGreaterThan(0);
  // The values and keys were Avro of the registry: Confluent's framing, a schema id that
  // the registry's Confluent-compatible API serves as an Avro envelope.
  const subjects = (await (await fetch(`${registry.url}/subjects`)).json()) as string[];
  expect(subjects).toEqual(expect.arrayContaining([`${topic}-key`, `${topic}-value`]));
  expect((await second.stop()).code).toBe(0);
  // Nothing was set aside: no placeholder left unresolved, no undecodable event.
  const deadLetters = await fsp
    .readFile(path.join(suite.work, `${c.name}.dlq.jsonl`), 'utf8')
    .catch(() => '');
  expect(deadLetters).toBe('');
  await dropConnector(prefix, name);
}, 600_000);
