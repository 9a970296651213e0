import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import type { Admin } from 'kafkajs';
import { untilHosted } from './broker-suite';
import { until } from './faults';
import { testBrokers, testKafka, uniqueName } from './kafka';
import { leasedLocalServer } from './leased-local-server';
import { runBounded } from './run-bounded';

/**
 * deploy/debezium-local for the Debezium suites: PostgreSQL (Debian's package, wal_level=logical)
 * and a Kafka Connect standalone worker with Debezium's PostgreSQL connector and Apicurio's
 * Avro converter (Maven Central jars), against the test broker. Suites share one pair of
 * servers, started by the first and stopped after the last (leased-local-server.ts).
 */
const DEPLOY = path.resolve(__dirname, '../../deploy/debezium-local');
const SCRIPT = path.join(DEPLOY, 'debezium-local');
export const DEBEZIUM_PG_PORT = Number(process.env.DEBEZIUM_TEST_PG_PORT ?? 19810);
const CONNECT_PORT = DEBEZIUM_PG_PORT + 1;

const ownEnv = () => ({
  DEBEZIUM_LOCAL_PG_PORT: String(DEBEZIUM_PG_PORT),
  DEBEZIUM_LOCAL_BROKERS: testBrokers().join(','),
});
const env = () => ({ ...process.env, ...ownEnv() });

function debezium(...args: string[]): string {
  const out = runBounded(SCRIPT, args, { env: env(), timeoutMs: 300_000 });
  if (out.status !== 0)
    throw new Error(`debezium-local ${args[0]} failed (${out.status}):\n${out.stderr}${out.stdout}`);
  return out.stdout;
}

/** Starts the servers for a suite unless they run; the last suite using them stops them. */
export function debeziumSuite(): void {
  leasedLocalServer({
    work: path.join(
      process.env.DEBEZIUM_LOCAL_HOME ?? path.join(DEPLOY, '.cache'),
      `connect-${CONNECT_PORT}`,
    ),
    label: `the local PostgreSQL and Kafka Connect on ports ${DEBEZIUM_PG_PORT} and ${CONNECT_PORT}`,
    // A first use installs PostgreSQL and fetches the jars.
    startTimeoutMs: 600_000,
    run: (command) => {
      const out = runBounded(SCRIPT, [command], { env: env(), timeoutMs: 300_000 });
      return { code: out.status, output: `${out.stdout}${out.stderr}`.trim() };
    },
    stopCommand: { script: SCRIPT, env: ownEnv() },
  });
}

/** psql on the cluster: one statement list, its rows unaligned. */
export const sql = (text: string): string => debezium('psql', '-At', '-c', text);

/** A Debezium connector for `public.<name>` into topic `<prefix>.public.<name>`, hosted. */
export async function startConnector(
  admin: Admin,
  prefix: string,
  name: string,
  partitions: number,
  extra: Record<string, string> = {},
): Promise<void> {
  debezium(
    'connector',
    prefix,
    JSON.stringify({
      'connector.class': 'io.debezium.connector.postgresql.PostgresConnector',
      'database.hostname': '127.0.0.1',
      'database.port': String(DEBEZIUM_PG_PORT),
      'database.user': 'postgres',
      'database.password': '',
      'database.dbname': 'postgres',
      'topic.prefix': prefix,
      'table.include.list': `public.${name}`,
      'plugin.name': 'pgoutput',
      'slot.name': prefix,
      'publication.name': prefix,
      'publication.autocreate.mode': 'filtered',
      'topic.creation.default.replication.factor': '1',
      'topic.creation.default.partitions': String(partitions),
      ...extra,
    }),
  );
  const topic = `${prefix}.public.${name}`;
  await until(
    'Debezium to create the topic',
    async () => ((await admin.listTopics()).includes(topic) ? true : undefined),
    120_000,
    500,
  );
  await untilHosted(admin, topic, partitions);
}

/**
 * Apicurio Registry's AvroConverter (its Maven Central jar, in deploy/debezium-local) for keys
 * and values, registering their schemas in the registry whose core API `registryApi` is
 * (Apicurio's /apis/registry/v2) and writing the Confluent wire format (magic byte, 4-byte
 * content id: the id the registry's Confluent-compatible API serves): a connector's settings.
 */
export function avroConverters(registryApi: string): Record<string, string> {
  const converter = (side: 'key' | 'value') => ({
    [`${side}.converter`]: 'io.apicurio.registry.utils.converter.AvroConverter',
    [`${side}.converter.apicurio.registry.url`]: registryApi,
    [`${side}.converter.apicurio.registry.auto-register`]: 'true',
    [`${side}.converter.apicurio.registry.as-confluent`]: 'true',
    [`${side}.converter.apicurio.registry.use-id`]: 'contentId',
    [`${side}.converter.apicurio.registry.headers.enabled`]: 'false',
  });
  return { ...converter('key'), ...converter('value') };
}

/** The connector, then its slot and publication (an idle slot would hold WAL for ever), and the table. */
export async function dropConnector(prefix: string, name: string): Promise<void> {
  runBounded('curl', ['-s', '-X', 'DELETE', `http://127.0.0.1:${CONNECT_PORT}/connectors/${prefix}`]);
  await until(
    'the slot to be released',
    () =>
      sql(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = '${prefix}' AND active`).trim() === '0'
        ? true
        : undefined,
    30_000,
    500,
  );
  sql(`SELECT pg_drop_replication_slot('${prefix}'); DROP PUBLICATION ${prefix}; DROP TABLE ${name};`);
}

/** How many of the topic's values hold `text`, read from its start to its end offsets now. */
export async function valuesHolding(admin: Admin, topic: string, text: string): Promise<number> {
  const ends = await admin.fetchTopicOffsets(topic);
  const left = new Map(ends.filter((e) => e.high !== e.low).map((e) => [e.partition, BigInt(e.high)]));
  const consumer = testKafka().consumer({ groupId: uniqueName('dbz-read') });
  let found = 0;
  try {
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    const done = new Promise<void>((resolve) => {
      if (left.size === 0) resolve();
      void consumer.run({
        eachMessage: ({ partition, message }) => {
          if (message.value?.toString('utf8').includes(text)) found++;
          if (BigInt(message.offset) + 1n >= (left.get(partition) ?? 0n)) left.delete(partition);
          if (left.size === 0) resolve();
          return Promise.resolve();
        },
      });
    });
    await done;
  } finally {
    await consumer.disconnect();
  }
  return found;
}

/** The live rows of the mirror table `logs` holding a `_sequence` (the LSN their event carried). */
export async function rowsWithSequence(lanceDir: string): Promise<number> {
  const db = await lancedb.connect(lanceDir);
  try {
    return await (await db.openTable('logs')).countRows('_deleted = false AND _sequence IS NOT NULL');
  } finally {
    db.close();
  }
}

/** The first difference between the mirror's rows and PostgreSQL's, for a failure message; undefined when equal. */
export function difference<Row>(
  lance: readonly Row[] | undefined,
  source: readonly Row[],
): string | undefined {
  if (!lance) return 'no Lance table yet';
  for (let i = 0; i < Math.max(lance.length, source.length); i++) {
    const a = JSON.stringify(lance[i] ?? null);
    const b = JSON.stringify(source[i] ?? null);
    if (a !== b)
      return `row ${i}: Lance ${a.slice(0, 160)} ≠ PostgreSQL ${b.slice(0, 160)} (${lance.length} vs ${source.length} rows)`;
  }
  return undefined;
}
