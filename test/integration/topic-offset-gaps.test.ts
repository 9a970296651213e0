import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { Partitioners, type Kafka } from 'kafkajs';
import { decodeChain } from '../../src/ownership/chain';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { checkFaultRun, finishFaultRun, settle, sleep, until, type Named } from '../support/faults';
import { logValue, produceRecords, type Produced } from '../support/ingestion-fixture';
import { testBrokers, uniqueName } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';

/**
 * Partitions whose offsets have gaps that no record fills: a compacted topic (the
 * cleaner removes records but keeps each rewritten batch's last offset), transactional
 * producers (aborted records and commit/abort markers are never delivered), and
 * retention or `deleteRecords` passing the group's position. Each must reach the log
 * end (committed = high watermark, markers included), hold exactly the records a
 * read_committed consumer can read, and keep the ownership chain in the commit
 * metadata. Real broker, real replica processes (run after `npm run build`).
 */
const suite = brokerSuite('kl-offset-gaps');

/** A keyed record as produced. */
interface KeyedRecord {
  readonly key: string;
  readonly value: string;
}

async function produceKeyed(
  kafka: Kafka,
  topic: string,
  partition: number,
  batches: readonly (readonly KeyedRecord[])[],
): Promise<(Produced & { key: string })[]> {
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  const produced: (Produced & { key: string })[] = [];
  try {
    // One send per batch: kafkajs writes it as one record batch, so the cleaner keeps
    // each batch's last offset while removing the records superseded later.
    for (const records of batches) {
      const [meta] = await producer.send({
        topic,
        acks: -1,
        messages: records.map((r) => ({ partition, key: r.key, value: r.value })),
      });
      const base = Number(meta!.baseOffset);
      records.forEach((r, i) => produced.push({ partition, offset: base + i, value: r.value, key: r.key }));
    }
  } finally {
    await producer.disconnect();
  }
  return produced;
}

/** Every record a read_committed consumer reads from the topic now, read to a quiet end. */
async function readableRecords(kafka: Kafka, topic: string, quietMs = 2_500): Promise<Produced[]> {
  const consumer = kafka.consumer({ groupId: uniqueName('reader'), sessionTimeout: 10_000 });
  const seen = new Map<string, Produced>();
  let last = Date.now();
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({
      eachBatch: ({ batch }) => {
        for (const m of batch.messages) {
          seen.set(`${batch.partition}:${m.offset}`, {
            partition: batch.partition,
            offset: Number(m.offset),
            value: m.value?.toString() ?? 'null',
          });
        }
        last = Date.now();
        return Promise.resolve();
      },
    });
    await until('the reader to reach a quiet end', () => (Date.now() - last > quietMs ? true : undefined));
  } finally {
    await consumer.disconnect();
  }
  return [...seen.values()];
}

async function startReplica(file: string, label: string, env: Record<string, string> = {}): Promise<Named> {
  const dataDir = await fsp.mkdtemp(path.join(suite.work, `data-${label}-`));
  return { label, process: new ReplicaProcess(file, dataDir, testBrokers(), env) };
}

async function stopAll(replicas: readonly Named[]): Promise<string[]> {
  const problems: string[] = [];
  for (const r of replicas) {
    const exit = await r.process.kill('SIGTERM');
    if (exit.code !== 0) problems.push(`${r.label} exited ${JSON.stringify(exit)} on SIGTERM`);
  }
  return problems;
}

async function metricsOf(r: Named): Promise<string> {
  return r.process.metricsText();
}

function seeksOf(replicas: readonly Named[]): number {
  return replicas.reduce(
    (n, r) => n + r.process.logs.filter((l) => l.event === 'kafka.position.refetch').length,
    0,
  );
}

test('a compacted topic whose batches lost their last records to the cleaner is consumed to the log end', async () => {
  const lanceDir = path.join(suite.work, `${uniqueName('compacted')}-lance`);
  const { topic, groupId, file } = await topicAndConsumer(
    suite,
    1,
    { lance: { uri: lanceDir }, materializer: { maxPublicationDelayMs: 200, pollMs: 200 } },
    {
      'cleanup.policy': 'compact',
      'segment.bytes': '65536',
      'segment.ms': '100',
      'min.cleanable.dirty.ratio': '0.01',
      'min.compaction.lag.ms': '0',
      'delete.retention.ms': '100',
    },
  );
  // Twenty batches of 100: the first 70 records of each have keys of their own (kept),
  // the last 30 share hot keys that every later batch writes again (compacted away), so
  // every batch but the last ends in offsets that hold no record. Segments of 64 KiB hold a few
  // batches each, and a fetch never reads past its segment's end: a fetch from inside a
  // compacted tail returns that batch alone, with nothing at or above the fetch offset.
  const pad = 'x'.repeat(200);
  const batches = Array.from({ length: 20 }, (_, b) =>
    Array.from({ length: 100 }, (_, i) => {
      const n = b * 100 + i;
      return i < 70
        ? {
            key: `own-${n}`,
            value: JSON.stringify({ n, level: 'info', service: 'svc', message: `${n} ${pad}` }),
          }
        : { key: `hot-${i}`, value: logValue(n) };
    }),
  );
  const produced = await produceKeyed(suite.kafka, topic, 0, batches);
  // segment.ms has passed: this record rolls a new segment, the old one becomes cleanable.
  await sleep(300);
  produced.push(
    ...(await produceKeyed(suite.kafka, topic, 0, [[{ key: 'roll', value: logValue(produced.length) }]])),
  );
  const latest = new Map<string, number>();
  for (const r of produced) latest.set(r.key, r.offset);
  const surviving = produced.filter((r) => latest.get(r.key) === r.offset);
  const readable = await until(
    'the cleaner to compact the topic',
    async () => {
      const now = await readableRecords(suite.kafka, topic);
      return now.length === surviving.length ? now : undefined;
    },
    120_000,
    1_000,
  );
  expect(readable.map((r) => r.offset).sort((a, b) => a - b)).toEqual(surviving.map((r) => r.offset));

  const replica = await startReplica(file, 'compacted');
  await finishFaultRun(suite.admin, { groupId, topic, lanceDir }, [replica], surviving, {
    commitTimeoutMs: 60_000,
    quietMs: 5_000,
  });
  // Gaps are followed, not fought: a handful of refetches at most (a stale fetch after a claim).
  expect(seeksOf([replica])).toBeLessThan(5);
});

test('a record batch the cleaner left empty is moved past, though the batch after it is larger than a fetch of the partition', async () => {
  const lanceDir = path.join(suite.work, `${uniqueName('emptied')}-lance`);
  const { topic, groupId, file } = await topicAndConsumer(
    suite,
    1,
    {
      lance: { uri: lanceDir },
      materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
      // A fetch of the partition (as large as the queue) is smaller than the second batch.
      queue: { maxBytes: 100_000 },
    },
    {
      'cleanup.policy': 'compact',
      'segment.ms': '100',
      'min.cleanable.dirty.ratio': '0.01',
      'min.compaction.lag.ms': '0',
      'delete.retention.ms': '100',
    },
  );
  // An idempotent producer's only record, superseded later: the cleaner removes the record
  // and keeps its batch, empty, for the producer's sequence (Java producers are idempotent
  // by default). Behind it, one batch of ~300 KB.
  const idempotent = suite.kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await idempotent.connect();
  const produced: (Produced & { key: string })[] = [];
  try {
    const [meta] = await idempotent.send({
      topic,
      acks: -1,
      messages: [{ partition: 0, key: 'hot', value: logValue(0) }],
    });
    produced.push({ partition: 0, offset: Number(meta!.baseOffset), value: logValue(0), key: 'hot' });
  } finally {
    await idempotent.disconnect();
  }
  const pad = 'x'.repeat(1_000);
  produced.push(
    ...(await produceKeyed(suite.kafka, topic, 0, [
      Array.from({ length: 300 }, (_, i) => ({
        key: `own-${i}`,
        value: JSON.stringify({ n: i + 1, level: 'info', service: 'svc', message: `${i} ${pad}` }),
      })),
      [{ key: 'hot', value: logValue(301) }],
    ])),
  );
  // segment.ms has passed: this record rolls a new segment, the old one becomes cleanable.
  await sleep(300);
  produced.push(...(await produceKeyed(suite.kafka, topic, 0, [[{ key: 'roll', value: logValue(302) }]])));
  const latest = new Map<string, number>();
  for (const r of produced) latest.set(r.key, r.offset);
  const surviving = produced.filter((r) => latest.get(r.key) === r.offset);
  expect(surviving).toHaveLength(302);
  await until(
    'the cleaner to remove the superseded record',
    async () => ((await readableRecords(suite.kafka, topic)).length === surviving.length ? true : undefined),
    120_000,
    1_000,
  );

  const replica = await startReplica(file, 'emptied');
  await finishFaultRun(suite.admin, { groupId, topic, lanceDir }, [replica], surviving, {
    commitTimeoutMs: 60_000,
    quietMs: 5_000,
  });
});

test('transactional producers: aborted records (one transaction larger than a fetch) never land, committed ones once, commits reach the log end past the markers', async () => {
  const lanceDir = path.join(suite.work, `${uniqueName('transactional')}-lance`);
  const { topic, groupId, file } = await topicAndConsumer(suite, 1, {
    lance: { uri: lanceDir },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const producer = suite.kafka.producer({
    transactionalId: uniqueName('txn'),
    idempotent: true,
    maxInFlightRequests: 1,
  });
  await producer.connect();
  let n = 0;
  const committed: string[] = [];
  const transaction = async (records: number, outcome: 'commit' | 'abort', perSend = 500) => {
    const txn = await producer.transaction();
    const values: string[] = [];
    for (let sent = 0; sent < records; sent += perSend) {
      const slice = Array.from({ length: Math.min(perSend, records - sent) }, () => logValue(n++));
      await txn.send({ topic, acks: -1, messages: slice.map((value) => ({ partition: 0, value })) });
      values.push(...slice);
    }
    if (outcome === 'commit') {
      await txn.commit();
      committed.push(...values);
    } else await txn.abort();
  };
  try {
    await transaction(200, 'commit');
    // ~5.5 MiB aborted: more than a fetch's 4 MiB per partition.
    await transaction(6_500, 'abort');
    await transaction(100, 'commit');
    for (let i = 0; i < 5; i++) {
      await transaction(20, 'abort', 20);
      await transaction(30, 'commit', 30);
    }
    // The log ends with an abort marker after aborted records.
    await transaction(40, 'abort', 40);
  } finally {
    await producer.disconnect();
  }
  const readable = await readableRecords(suite.kafka, topic);
  expect(readable.map((r) => r.value).sort()).toEqual([...committed].sort());

  const replica = await startReplica(file, 'transactional');
  const settled = await settle(suite.admin, groupId, topic, lanceDir, readable.length, {
    commitTimeoutMs: 60_000,
    quietMs: 5_000,
  });
  const report = await checkFaultRun({
    admin: suite.admin,
    groupId,
    topic,
    lanceDir,
    produced: readable,
    replicas: [replica],
    problems: [...settled.problems],
  });
  // The replica reports no lag once it committed past the last marker.
  const metrics = await metricsOf(replica);
  const stopped = await stopAll([replica]);
  expect([...report.problems, ...stopped]).toEqual([]);
  expect(metrics).toMatch(/kafka_lance_consumer_lag\{[^}]*partition="0"[^}]*\} 0\b/);
  expect(seeksOf([replica])).toBeLessThan(5);
});

// fromBeginning false: a claim that found no commit (kafkajs's reset used to erase it) would
// start at the log end and skip every record still in Kafka.
describe('retention passing the group position', () => {
  const fromBeginning = false;
  test('resumes at the earliest offset, counts the records it never saw, keeps the chain and commits to the log end', async () => {
    const lanceDir = path.join(suite.work, `${uniqueName('retention')}-lance`);
    const PARTITIONS = 2;
    const { topic, groupId, file } = await topicAndConsumer(suite, PARTITIONS, {
      fromBeginning,
      lance: { uri: lanceDir },
      materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
    });
    // With fromBeginning false a replica starts at the log end: start it before producing.
    const first = await startReplica(file, 'first');
    await first.process.waitForEvent('kafka.join', 60_000);
    const before = await produceRecords(suite.kafka, topic, PARTITIONS, 1_000);
    const s1 = await settle(suite.admin, groupId, topic, lanceDir, before.length, { quietMs: 5_000 });
    if (s1.problems.length > 0) console.log(first.process.tail(60));
    expect(s1.problems).toEqual([]);
    expect(await stopAll([first])).toEqual([]);

    // While no replica runs: 1,000 more records, and the log start moves past the group's
    // position (500 per partition) to 750 per partition.
    const after = await produceRecords(suite.kafka, topic, PARTITIONS, 1_000, undefined, 1_000);
    await suite.admin.deleteTopicRecords({
      topic,
      partitions: Array.from({ length: PARTITIONS }, (_, partition) => ({ partition, offset: '750' })),
    });
    const kept = [...before, ...after.filter((r) => r.offset >= 750)];

    const second = await startReplica(file, 'second');
    const settled = await settle(suite.admin, groupId, topic, lanceDir, kept.length, {
      commitTimeoutMs: 60_000,
      quietMs: 5_000,
    });
    const lost = await until(
      'the warning naming the records retention removed',
      () => {
        const lines = second.process.logs.filter((l) => l.event === 'kafka.offsets.lost');
        return lines.length >= PARTITIONS ? lines : undefined;
      },
      10_000,
    ).catch(() => second.process.logs.filter((l) => l.event === 'kafka.offsets.lost'));
    const metrics = await metricsOf(second).catch(() => '');
    const report = await checkFaultRun({
      admin: suite.admin,
      groupId,
      topic,
      lanceDir,
      produced: kept,
      replicas: [first, second],
      problems: [...settled.problems],
    });
    const [committed] = await suite.admin.fetchOffsets({ groupId, topics: [topic] });
    const stopped = await stopAll([second]);
    expect([...report.problems, ...stopped]).toEqual([]);
    // Handled, not an error: kafkajs's error line for each out-of-range fetch is an info line.
    expect(second.process.logs.filter((l) => l.level >= 50).map((l) => l.msg)).toEqual([]);
    // Nothing erased the chain: every partition's commit still carries its claims.
    for (const p of committed!.partitions) expect(decodeChain(p.metadata).length).toBeGreaterThan(0);
    expect(
      lost
        .map((l) => ({ partition: l.partition, from: l.from, to: l.to }))
        .sort((a, b) => Number(a.partition) - Number(b.partition)),
    ).toEqual(Array.from({ length: PARTITIONS }, (_, partition) => ({ partition, from: 500, to: 749 })));
    for (let partition = 0; partition < PARTITIONS; partition++) {
      expect(metrics).toMatch(
        new RegExp(`kafka_lance_offsets_lost_total\\{[^}]*partition="${partition}"[^}]*\\} 250\\b`),
      );
    }
  });
});
