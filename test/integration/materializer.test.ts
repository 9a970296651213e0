import { createHash } from 'node:crypto';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { produceRecords, waitForCommittedAtEnd, type Produced } from '../support/ingestion-fixture';
import { testBrokers, uniqueName } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';
import { openTableIfCommitted } from '../../src/lance/open-if-committed';

/**
 * Kafka to Lance through a real replica process: every produced record lands in the
 * Lance table exactly once, with its payload, in both preparation modes.
 */
const suite = brokerSuite('kl-e2e');
const { kafka } = suite;

const RECORDS = 500_000;

function checksum(rows: Iterable<[number, number, bigint | number, string]>): string {
  const sorted = [...rows].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const h = createHash('sha256');
  for (const [p, o, n, m] of sorted) h.update(`${p}:${o}:${n}:${m}\n`);
  return h.digest('hex');
}

/** The checksum of what was produced, in the shape lanceRows() gives. */
function producedChecksum(produced: readonly Produced[]): string {
  return checksum(
    produced.map((p) => {
      const v = JSON.parse(p.value) as { n: number; message: string };
      return [p.partition, p.offset, BigInt(v.n), v.message] as [number, number, bigint, string];
    }),
  );
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
      const t = await openTableIfCommitted(db, table);
      if (t) {
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
    const { topic, groupId, file } = await topicAndConsumer(suite, 6, {
      durabilityIntervalMs: 250,
      staging: { maxPartBytes: 16 * 1024 * 1024, maxPartAgeMs: 1_000 },
      materializer: {
        pipelinePreparation,
        maxPublicationBytes: 32 * 1024 * 1024,
        maxPublicationDelayMs: 500,
        pollMs: 250,
      },
    });
    const produced: Produced[] = await produceRecords(kafka, topic, 6, RECORDS);
    const dataDir = await tempDir('kl-e2e-data');
    const replica = new ReplicaProcess(file, dataDir, testBrokers());
    const started = Date.now();
    await waitForCommittedAtEnd(suite.admin, groupId, topic);
    await waitForRows(path.join(dataDir, 'lance'), 'logs', RECORDS);
    const seconds = (Date.now() - started) / 1000;
    expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

    const rows = await lanceRows(path.join(dataDir, 'lance'), 'logs');
    expect(rows).toHaveLength(RECORDS);
    expect(new Set(rows.map((r) => `${r._partition}:${r._offset}`)).size).toBe(RECORDS);
    const expected = producedChecksum(produced);
    expect(checksum(rows.map((r) => [r._partition, Number(r._offset), r.n, r.message]))).toBe(expected);
    const published = replica.logs.filter((l) => l.event === 'publication');
    expect(published.length).toBeGreaterThan(1);
    console.log(
      `${pipelinePreparation ? 'streamed' : 'buffered'}: ${RECORDS} records Kafka → Lance in ${seconds.toFixed(1)} s, ${published.length} publications`,
    );
  },
);

test('two replicas publishing into one Lance table, one SIGKILLed mid-stream and restarted: every record exactly once', async () => {
  const lanceDir = path.join(suite.work, `${uniqueName('shared')}-lance`);
  const { topic, groupId, file } = await topicAndConsumer(suite, 4, {
    staging: { maxPartBytes: 4 * 1024 * 1024, maxPartAgeMs: 500 },
    lance: { uri: lanceDir },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const produced: Produced[] = [];
  const producing = (async () => {
    for (let i = 0; i < 20; i++) {
      produced.push(...(await produceRecords(kafka, topic, 4, 4_000, undefined, i * 4_000)));
      await new Promise((r) => setTimeout(r, 400));
    }
  })();
  const dirA = await tempDir('kl-two-a');
  let a = new ReplicaProcess(file, dirA, testBrokers());
  const b = new ReplicaProcess(file, await tempDir('kl-two-b'), testBrokers());
  await a.waitForEvent('kafka.join');
  await b.waitForEvent('kafka.join');
  await a.waitForEvent('publication');
  expect((await a.kill('SIGKILL')).signal).toBe('SIGKILL');
  await new Promise((r) => setTimeout(r, 3_000));
  a = new ReplicaProcess(file, dirA, testBrokers());
  await producing;
  await waitForCommittedAtEnd(suite.admin, groupId, topic);
  await waitForRows(lanceDir, 'logs', produced.length);
  // Let both replicas publish whatever else they might (a duplicate would show up now).
  await new Promise((r) => setTimeout(r, 2_000));
  expect(await a.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  expect(await b.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  const rows = await lanceRows(lanceDir, 'logs');
  expect(rows).toHaveLength(produced.length);
  expect(new Set(rows.map((r) => `${r._partition}:${r._offset}`)).size).toBe(produced.length);
  const expected = producedChecksum(produced);
  expect(checksum(rows.map((r) => [r._partition, Number(r._offset), r.n, r.message]))).toBe(expected);
});
