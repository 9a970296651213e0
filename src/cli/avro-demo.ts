import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { COMPATIBILITY, SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import { Kafka, Partitioners, logLevel } from 'kafkajs';
import type { ResolvedConsumer } from '../config';
import { OFFSET_COLUMN, PARTITION_COLUMN, TOPIC_COLUMN } from '../staging/system-columns';
import { BAD_RATIO, runDemo, type DemoOptions, type DemoVariant } from './demo';
import type { RunRanges } from './demo-summary';
import { CliError } from './errors';
import { registerCompressionCodecs } from '../kafka/protocol/compression';
import { openExistingTable, quote } from './lance-read';
import { logRecord } from './log-records';
import { ADDED_FIELD, LOG_V1, LOG_V2, avroLog } from './avro-log-records';
import { ROOT } from './paths';

export const AVRO_LOGS_CONSUMER = path.join(ROOT, 'consumers/app-logs-avro.ts');
export const SCHEMA_REGISTRY_LOCAL = path.join(ROOT, 'deploy/schema-registry-local/schema-registry-local');
const TOPIC = 'app-logs-avro';
const DLQ = `${TOPIC}.dlq`;
const SEND_BATCH = 500;
const TICK_MS = 100;

/** The registry the demo uses: SCHEMA_REGISTRY_URL, or the project's own started for the run. */
export function startRegistryIfNeeded(o: Pick<DemoOptions, 'print'>): { url: string; started: boolean } {
  const configured = process.env.SCHEMA_REGISTRY_URL;
  if (configured) return { url: configured.replace(/\/+$/, ''), started: false };
  o.print(
    'No SCHEMA_REGISTRY_URL: starting the local Schema Registry (Apicurio; the first run fetches it with Maven, it needs Java 21+)…',
  );
  const status = spawnSync(SCHEMA_REGISTRY_LOCAL, ['status'], { encoding: 'utf8' });
  const start = spawnSync(SCHEMA_REGISTRY_LOCAL, ['start'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (start.status !== 0) {
    throw new CliError(
      'SCHEMA_REGISTRY_UNAVAILABLE',
      `the local Schema Registry did not start:\n${start.stdout}${start.stderr}\nIt needs Java 21+ and Maven; or point the demo at a running Confluent-compatible registry with SCHEMA_REGISTRY_URL=http://host:port (the API base).`,
    );
  }
  o.print(start.stdout.trim());
  const url = spawnSync(SCHEMA_REGISTRY_LOCAL, ['url'], { encoding: 'utf8' }).stdout.trim();
  return { url, started: status.status !== 0 };
}

/**
 * The Avro log demo: the log demo's run (embedded broker, one replica, the exactly-once
 * check) on consumers/app-logs-avro.ts, the records Avro-encoded by Confluent's serializer
 * (@kafkajs/confluent-schema-registry) with a schema the demo registers, and a second
 * version of it registered half-way through the run: its added field becomes a new column.
 */
export async function runAvroDemo(o: DemoOptions): Promise<void> {
  const registry = startRegistryIfNeeded(o);
  // The consumer definition and the replica (a child process) read the registry from here.
  process.env.SCHEMA_REGISTRY_URL = registry.url;
  try {
    await runDemo(o, avroLogs(registry.url));
  } finally {
    if (registry.started) {
      spawnSync(SCHEMA_REGISTRY_LOCAL, ['stop'], { stdio: 'ignore' });
      o.print('Stopped the local Schema Registry.');
    }
  }
}

function avroLogs(url: string): DemoVariant {
  const registry = new SchemaRegistry({ host: url });
  const versions: { id: number; from: number }[] = [];
  let v2Records = 0;
  return {
    consumerFile: AVRO_LOGS_CONSUMER,
    topic: TOPIC,
    dlq: DLQ,
    label: 'avro-demo',
    produce: async ({ brokers, count, rate, onSent }) => {
      const subject = { subject: `${TOPIC}-value` };
      const register = async (schema: unknown, from: number) => {
        const { id } = await registry.register(
          { type: SchemaType.AVRO, schema: JSON.stringify(schema) },
          { ...subject, compatibility: COMPATIBILITY.BACKWARD },
        );
        versions.push({ id, from });
        return id;
      };
      let schemaId = await register(LOG_V1, 0);
      const evolveAt = Math.floor(count / 2);
      registerCompressionCodecs();
      const kafka = new Kafka({
        clientId: 'kafka-lance-avro-demo',
        brokers: [...brokers],
        logLevel: logLevel.NOTHING,
      });
      // Idempotent: a retried send never writes a record twice, so `count` records land exactly.
      const producer = kafka.producer({
        idempotent: true,
        maxInFlightRequests: 1,
        createPartitioner: Partitioners.DefaultPartitioner,
      });
      await producer.connect();
      try {
        const started = Date.now();
        for (let sent = 0; sent < count;) {
          if (sent >= evolveAt && versions.length === 1) schemaId = await register(LOG_V2, sent);
          const due = Math.min(count, Math.floor(((Date.now() - started + TICK_MS) * rate) / 1000));
          // Version 1 up to the evolution point, version 2 after it: no send mixes them.
          const end = Math.min(due, sent + SEND_BATCH, versions.length === 1 ? evolveAt : count);
          const messages: { value: Buffer }[] = [];
          for (let n = sent; n < end; n++) {
            const r = logRecord(n, Date.now(), { badRatio: BAD_RATIO });
            if (r.bad) {
              // Not in the wire format at all: a dead letter (wrong-magic-byte).
              messages.push({ value: Buffer.from(r.value) });
              continue;
            }
            const record = avroLog(r.value);
            if (versions.length > 1) {
              record[ADDED_FIELD] = `2026.12.${n % 3}`;
              v2Records++;
            }
            messages.push({ value: await registry.encode(schemaId, record) });
          }
          if (messages.length > 0) {
            await producer.send({ topic: TOPIC, acks: -1, messages });
            sent += messages.length;
            onSent(sent);
          } else {
            await new Promise((r) => setTimeout(r, TICK_MS));
          }
        }
      } finally {
        await producer.disconnect();
      }
    },
    report: (consumer, ranges) => schemaReport(consumer, ranges, versions, v2Records),
  };
}

/** The schema versions of the run and the column the second one added, read back from the table. */
async function schemaReport(
  consumer: ResolvedConsumer,
  ranges: RunRanges,
  versions: readonly { id: number; from: number }[],
  v2Records: number,
): Promise<{ lines: string[]; problems: string[] }> {
  const lines = versions.map(
    (v, i) =>
      `Schema        version ${i + 1} (registry id ${v.id}) from record ${v.from}${i > 0 ? `: adds "${ADDED_FIELD}"` : ''}`,
  );
  const problems: string[] = [];
  if (versions.length < 2) problems.push('the run ended before the second schema version was produced');
  const opened = await openExistingTable(consumer);
  try {
    const column = (await opened.table.schema()).fields.find((f) => f.name === ADDED_FIELD);
    const ofRun = [...ranges]
      .filter(([, r]) => r.to > r.from)
      .map(
        ([p, r]) =>
          `(${PARTITION_COLUMN} = ${p} AND ${OFFSET_COLUMN} >= ${r.from} AND ${OFFSET_COLUMN} < ${r.to})`,
      );
    const withValue = column
      ? await opened.table.countRows(
          `${TOPIC_COLUMN} = ${quote(TOPIC)} AND ${ADDED_FIELD} IS NOT NULL AND (${ofRun.join(' OR ') || 'false'})`,
        )
      : 0;
    lines.push(
      column
        ? `New column    ${ADDED_FIELD} (${String(column.type)}, nullable): ${withValue} rows of this run hold a value = ${v2Records} records of version 2: ${withValue === v2Records ? 'yes' : 'NO'}`
        : `New column    ${ADDED_FIELD}: NOT in the table`,
    );
    if (!column) problems.push(`the table has no column ${ADDED_FIELD}`);
    else if (withValue !== v2Records)
      problems.push(
        `${withValue} rows hold ${ADDED_FIELD}, but ${v2Records} records of version 2 were produced`,
      );
  } finally {
    opened.close();
  }
  return { lines, problems };
}
