import * as lancedb from '@lancedb/lancedb';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { brokerSuite, untilHosted } from '../support/broker-suite';
import { until } from '../support/faults';
import { produceRecords } from '../support/ingestion-fixture';
import { testBrokers, uniqueName } from '../support/kafka';
import { ReplicaProcess, type LogLine } from '../../src/harness/replica-process';

/**
 * `offsets.commitAfter: 'published'`: replica A publishes records into Lance and is
 * killed before it commits them (KAFKA_LANCE_TEST_CRASH_AT=after-published). A deploy
 * follows whose transform emits one row per record where A's emitted three. B consumes
 * the same records again from the old commit; its insert-if-absent publication finds the
 * three rows of each record A published, more than it holds. The table explains that
 * (every record there, each (_topic, _partition, _offset, _row) once): B's publication is
 * done and its commits reach the log end, where a count rule alone stopped the table
 * (PartialPublicationError) at every restart. Run after `npm run build`.
 */
const suite = brokerSuite('kl-transform-deploy');
const RECORDS = 600;

async function writeDefinition(
  name: string,
  label: string,
  topic: string,
  lanceDir: string,
  rowsPerRecord: number,
): Promise<string> {
  const file = path.join(suite.work, `${name}-${label}.js`);
  const definition = {
    name,
    topics: [topic],
    table: 'logs',
    schema: { fields: { n: { type: 'int64', nullable: false }, item: { type: 'string', nullable: false } } },
    offsets: { commitAfter: 'published' },
    lance: { uri: lanceDir },
    staging: { maxPartBytes: 4 * 1024 * 1024, maxPartAgeMs: 500 },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
    deadLetter: { file: path.join(suite.work, `${name}.dlq.jsonl`) },
    durabilityIntervalMs: 200,
    sessionTimeoutMs: 6_000,
    heartbeatIntervalMs: 500,
    workers: 2,
  };
  await fsp.writeFile(
    file,
    `module.exports = { ...${JSON.stringify(definition)},
  transform: (r) => Array.from({ length: ${rowsPerRecord} }, (_, i) => ({ n: r.value.n, item: r.offset + '/' + i })) };\n`,
  );
  return file;
}

interface KeyRow {
  readonly offset: number;
  readonly row: number;
}

async function readKeys(lanceDir: string): Promise<KeyRow[]> {
  const db = await lancedb.connect(lanceDir);
  try {
    const table = await db.openTable('logs');
    try {
      const rows = (await table.query().select(['_offset', '_row']).toArray()) as {
        _offset: bigint;
        _row: number;
      }[];
      return rows.map((r) => ({ offset: Number(r._offset), row: r._row }));
    } finally {
      table.close();
    }
  } finally {
    db.close();
  }
}

test("commitAfter 'published': after a deploy whose transform emits fewer rows per record, the next owner re-publishes the dead owner's published, uncommitted records and commits them", async () => {
  const name = uniqueName('c').replace(/[^A-Za-z0-9_-]/g, '');
  const topic = uniqueName('topic');
  const groupId = `kafka-lance-${name}`;
  const lanceDir = path.join(suite.work, `${name}-lance`);
  const { admin, kafka } = suite;
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
  await untilHosted(admin, topic, 1);
  await produceRecords(kafka, topic, 1, RECORDS);
  const [end] = await admin.fetchTopicOffsets(topic);
  const logEnd = Number(end!.high);

  // A: three rows per record; killed right after its first publication is `published`.
  const a = new ReplicaProcess(
    await writeDefinition(name, 'three-rows', topic, lanceDir, 3),
    await fsp.mkdtemp(path.join(suite.work, 'data-A-')),
    testBrokers(),
    { KAFKA_LANCE_TEST_CRASH_AT: 'after-published' },
  );
  expect((await a.exited).signal).toBe('SIGKILL');
  const byA = await readKeys(lanceDir);
  const aOffsets = new Set(byA.map((k) => k.offset));
  expect(aOffsets.size).toBeGreaterThan(0);
  expect(byA.length).toBe(3 * aOffsets.size);
  const [held] = await admin.fetchOffsets({ groupId, topics: [topic] });
  const committedByA = Number(held!.partitions[0]!.offset);
  // Nothing A published is committed: B consumes it again.
  for (const o of aOffsets) expect(o).toBeGreaterThanOrEqual(Math.max(0, committedByA));

  // B, after the deploy: one row per record, on a data directory of its own.
  const b = new ReplicaProcess(
    await writeDefinition(name, 'one-row', topic, lanceDir, 1),
    await fsp.mkdtemp(path.join(suite.work, 'data-B-')),
    testBrokers(),
  );
  const fatal = (l: LogLine) => l.event === 'materializer.fatal';
  await until(
    'B to commit up to the log end (or its materializer to stop)',
    async () => {
      if (b.logs.some(fatal)) return 'fatal';
      const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] });
      return Number(offsets!.partitions[0]!.offset) === logEnd ? 'committed' : undefined;
    },
    120_000,
    500,
  );
  expect(b.logs.filter(fatal)).toEqual([]);
  expect(b.logs.some((l) => l.event === 'publication.explained')).toBe(true);
  const exit = await b.kill('SIGTERM');
  expect(exit.code).toBe(0);

  // Every record once: A's with its three rows, the rest with B's one; no key twice.
  const keys = await readKeys(lanceDir);
  const seen = new Set<string>();
  for (const k of keys) {
    const key = `${k.offset}/${k.row}`;
    expect(seen.has(key)).toBe(false);
    seen.add(key);
  }
  for (let o = 0; o < logEnd; o++) {
    const rows = aOffsets.has(o) ? 3 : 1;
    for (let r = 0; r < rows; r++) expect(seen.has(`${o}/${r}`)).toBe(true);
  }
  expect(keys.length).toBe(logEnd + 2 * aOffsets.size);
}, 240_000);
