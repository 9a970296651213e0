import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import type { Admin } from 'kafkajs';
import {
  produceRecords,
  waitForCommittedAtEnd,
  writeConsumer,
  type Produced,
} from '../support/ingestion-fixture';
import { testBrokers, testKafka, uniqueName } from '../support/kafka';
import { ReplicaProcess } from '../support/replica-process';
import { tempDir } from '../support/rows';

/**
 * Kafka to Lance through a real replica process: every produced record lands in the
 * Lance table exactly once, with its payload, in both preparation modes.
 */
const kafka = testKafka();
let admin: Admin;
let work: string;
beforeAll(async () => {
  admin = kafka.admin();
  await admin.connect();
  work = await tempDir('kl-e2e');
});
afterAll(async () => {
  await ReplicaProcess.killAll();
  await admin.disconnect();
  await fsp.rm(work, { recursive: true, force: true });
});

const RECORDS = 500_000;

function checksum(rows: Iterable<[number, number, bigint | number, string]>): string {
  const sorted = [...rows].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const h = createHash('sha256');
  for (const [p, o, n, m] of sorted) h.update(`${p}:${o}:${n}:${m}\n`);
  return h.digest('hex');
}

async function lanceRows(dir: string, table: string) {
  const db = await lancedb.connect(dir);
  const t = await db.openTable(table);
  const rows = (await t.query().select(['_partition', '_offset', 'n', 'message']).toArray()) as {
    _partition: number;
    _offset: bigint;
    n: bigint;
    message: string;
  }[];
  t.close();
  db.close();
  return rows;
}

async function waitForRows(dir: string, table: string, expected: number, timeoutMs = 240_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const db = await lancedb.connect(dir, { readConsistencyInterval: 0 });
  try {
    for (;;) {
      if ((await db.tableNames()).includes(table)) {
        const t = await db.openTable(table);
        const n = await t.countRows();
        t.close();
        if (n >= expected) return;
      }
      if (Date.now() > deadline) throw new Error(`table ${table} never reached ${expected} rows`);
      await new Promise((r) => setTimeout(r, 500));
    }
  } finally {
    db.close();
  }
}

test.each([false, true])(
  '500,000 records land in Lance exactly once with their payload (pipelinePreparation: %s)',
  async (pipelinePreparation) => {
    const topic = uniqueName('e2e');
    const name = uniqueName('e2e').replace(/[^A-Za-z0-9_-]/g, '');
    await admin.createTopics({ topics: [{ topic, numPartitions: 6 }], waitForLeaders: true });
    const produced: Produced[] = await produceRecords(kafka, topic, 6, RECORDS);
    const file = await writeConsumer(work, {
      name,
      topics: [topic],
      table: 'logs',
      schema: { fields: { n: 'int64', level: 'string', service: 'string', message: 'string' } },
      deadLetter: { file: path.join(work, `${name}.dlq`) },
      durabilityIntervalMs: 250,
      sessionTimeoutMs: 6_000,
      heartbeatIntervalMs: 1_000,
      staging: { maxPartBytes: 16 * 1024 * 1024, maxPartAgeMs: 1_000 },
      materializer: {
        pipelinePreparation,
        maxPublicationBytes: 32 * 1024 * 1024,
        maxPublicationDelayMs: 500,
        pollMs: 250,
      },
    });
    const dataDir = await tempDir('kl-e2e-data');
    const replica = new ReplicaProcess(file, dataDir, testBrokers());
    const started = Date.now();
    await waitForCommittedAtEnd(admin, `kafka-lance-${name}`, topic);
    await waitForRows(path.join(dataDir, 'lance'), 'logs', RECORDS);
    const seconds = (Date.now() - started) / 1000;
    expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

    const rows = await lanceRows(path.join(dataDir, 'lance'), 'logs');
    expect(rows).toHaveLength(RECORDS);
    expect(new Set(rows.map((r) => `${r._partition}:${r._offset}`)).size).toBe(RECORDS);
    const expected = checksum(
      produced.map((p) => {
        const v = JSON.parse(p.value) as { n: number; message: string };
        return [p.partition, p.offset, BigInt(v.n), v.message] as [number, number, bigint, string];
      }),
    );
    expect(checksum(rows.map((r) => [r._partition, Number(r._offset), r.n, r.message]))).toBe(expected);
    const published = replica.logs.filter((l) => l.event === 'publication');
    expect(published.length).toBeGreaterThan(1);
    console.log(
      `${pipelinePreparation ? 'streamed' : 'buffered'}: ${RECORDS} records Kafka → Lance in ${seconds.toFixed(1)} s, ${published.length} publications`,
    );
  },
);
