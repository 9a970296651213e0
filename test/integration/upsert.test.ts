import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { Partitioners, type Kafka } from 'kafkajs';
import { brokerSuite, topicAndConsumer, untilHosted } from '../support/broker-suite';
import { sleep, until } from '../support/faults';
import { waitForCommittedAtEnd } from '../support/ingestion-fixture';
import { testBrokers, uniqueName } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { sumOf } from '../../src/harness/prometheus-text';
import type { InspectReport } from '../../src/cli/inspect';
import { runBounded } from '../support/run-bounded';
import { openTableIfCommitted } from '../../src/lance/open-if-committed';

const BIN = path.resolve(__dirname, '../../bin/kafka-lance');

/**
 * Upsert tables fed by a real broker through real replica processes: the Lance table ends
 * equal to the newest value of each key in Kafka's order, tombstones delete, whether the
 * replica consumed all along, started fresh on a topic the cleaner compacted, or was
 * SIGKILLed between a merge and its `published` mark (and at a random instant) and
 * restarted on its data directory. Run after `npm run build` (replicas run from dist/).
 */
const suite = brokerSuite('kl-upsert');
const PARTITIONS = 3;

interface Change {
  readonly key: string;
  /** null: a tombstone. */
  readonly value: string | null;
}

/** Sends the changes in order (one send per chunk, keyed: the default partitioner spreads keys). */
async function produceChanges(kafka: Kafka, topic: string, changes: readonly Change[]): Promise<void> {
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  try {
    for (let i = 0; i < changes.length; i += 200) {
      await producer.send({
        topic,
        acks: -1,
        messages: changes.slice(i, i + 200).map((c) => ({ key: c.key, value: c.value })),
      });
    }
  } finally {
    await producer.disconnect();
  }
}

/** `rounds` writes of `keys` keys (a value each, message naming its round), every fifth key deleted in odd rounds. */
function workload(keys: number, rounds: number, tag: string): Change[] {
  const changes: Change[] = [];
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < keys; k++) {
      const key = `${tag}-${k}`;
      if (r % 2 === 1 && k % 5 === r % 5) changes.push({ key, value: null });
      else
        changes.push({
          key,
          value: JSON.stringify({
            n: r * keys + k,
            level: 'info',
            service: 'svc',
            message: `${key} round ${r}`,
          }),
        });
    }
  }
  return changes;
}

/** Each key's newest message, tombstoned keys absent: what the table must hold. */
function latest(changes: readonly Change[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const c of changes) {
    if (c.value === null) out.delete(c.key);
    else out.set(c.key, (JSON.parse(c.value) as { message: string }).message);
  }
  return out;
}

/** The live rows (`_deleted = false`) as key → message; throws if a key is held twice. */
async function tableState(lanceDir: string, table = 'logs'): Promise<Map<string, string> | undefined> {
  const db = await lancedb.connect(lanceDir, { readConsistencyInterval: 0 });
  try {
    const t = await openTableIfCommitted(db, table);
    if (!t) return undefined;
    const rows = (await t.query().where('_deleted = false').select(['_key', 'message']).toArray()) as {
      _key: string;
      message: string;
    }[];
    t.close();
    const state = new Map<string, string>();
    for (const r of rows) {
      if (state.has(r._key)) throw new Error(`key ${r._key} is held twice`);
      state.set(r._key, r.message);
    }
    return state;
  } finally {
    db.close();
  }
}

/** The keys where the table and `expected` differ (at most 10), for a failure message. */
function differences(
  state: ReadonlyMap<string, string> | undefined,
  expected: ReadonlyMap<string, string>,
): string[] {
  if (!state) return ['no table'];
  const out: string[] = [];
  for (const [k, v] of expected) if (state.get(k) !== v) out.push(`${k}: ${state.get(k)} ≠ ${v}`);
  for (const [k, v] of state) if (!expected.has(k)) out.push(`${k}: ${v} (deleted in Kafka)`);
  return out.slice(0, 10);
}

async function untilEqual(lanceDir: string, expected: ReadonlyMap<string, string>, timeoutMs = 180_000) {
  let last: string[] = [];
  try {
    await until(
      'the table to equal the newest value per key',
      async () => {
        last = differences(await tableState(lanceDir), expected);
        return last.length === 0 ? true : undefined;
      },
      timeoutMs,
      500,
    );
  } catch (error) {
    throw new Error(`${String(error)}; differences: ${last.join('; ')}`);
  }
}

async function upsertConsumer(extra: Record<string, unknown> = {}, topicConfig: Record<string, string> = {}) {
  const lanceDir = path.join(suite.work, `${uniqueName('upsert')}-lance`);
  const consumer = await topicAndConsumer(
    suite,
    PARTITIONS,
    {
      mode: 'upsert',
      key: 'record-key',
      keyFormat: 'string',
      lance: { uri: lanceDir },
      staging: { maxPartBytes: 4 * 1024 * 1024, maxPartAgeMs: 300 },
      materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
      ...extra,
    },
    topicConfig,
  );
  return { ...consumer, lanceDir };
}

const replica = async (file: string, label: string, dataDir?: string, env: NodeJS.ProcessEnv = {}) =>
  new ReplicaProcess(
    file,
    dataDir ?? (await fsp.mkdtemp(path.join(suite.work, `data-${label}-`))),
    testBrokers(),
    env,
  );

test('a compacted topic: a replica consuming all along and a fresh group after the cleaner ran both hold the newest value per key, tombstoned keys absent', async () => {
  const compacted = {
    'cleanup.policy': 'compact',
    'segment.bytes': '16384',
    'segment.ms': '100',
    'min.cleanable.dirty.ratio': '0.01',
    'min.compaction.lag.ms': '0',
    'delete.retention.ms': '100',
  };
  const along = await upsertConsumer({}, compacted);
  const alongData = await fsp.mkdtemp(path.join(suite.work, 'data-along-'));
  const alongReplica = await replica(along.file, 'along', alongData);
  await alongReplica.waitReady();
  const changes = workload(300, 8, 'doc');
  // Not a Debezium envelope: a value that spells its TOAST placeholder is a value, not "unchanged".
  const spelled = { n: 10_000, level: 'info', service: 'svc', message: '__debezium_unavailable_value' };
  changes.push({ key: 'doc-1', value: JSON.stringify(spelled) });
  await produceChanges(suite.kafka, along.topic, changes);
  // segment.ms has passed: these roll new segments, and the old ones become cleanable.
  await sleep(300);
  const roll: Change[] = Array.from({ length: PARTITIONS * 4 }, (_, i) => ({
    key: `roll-${i}`,
    value: null,
  }));
  await produceChanges(suite.kafka, along.topic, roll);
  const all = [...changes, ...roll];
  const expected = latest(all);
  await untilEqual(along.lanceDir, expected);
  await waitForCommittedAtEnd(suite.admin, along.groupId, along.topic);
  // The cleaner removed superseded records: the log holds far fewer than were produced.
  const readable = await until(
    'the cleaner to compact the topic',
    async () => {
      const n = await countReadable(suite.kafka, along.topic);
      return n < all.length / 2 ? n : undefined;
    },
    120_000,
    2_000,
  );
  expect(readable).toBeLessThan(all.length / 2);

  // A fresh group (another consumer, another table) reads the compacted log.
  const freshDir = path.join(suite.work, `${uniqueName('fresh')}-lance`);
  const fresh = await topicAndConsumer(suite, PARTITIONS, {
    topics: [along.topic],
    mode: 'upsert',
    key: 'record-key',
    keyFormat: 'string',
    lance: { uri: freshDir },
    staging: { maxPartAgeMs: 300 },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const freshReplica = await replica(fresh.file, 'fresh');
  await untilEqual(freshDir, expected);
  await waitForCommittedAtEnd(suite.admin, fresh.groupId, along.topic);
  const metrics = await alongReplica.metrics();
  expect(sumOf(metrics, 'kafka_lance_upserted_rows_total')).toBeGreaterThan(0);
  expect(sumOf(metrics, 'kafka_lance_deleted_rows_total')).toBeGreaterThan(0);
  expect(sumOf(metrics, 'kafka_lance_merge_duration_seconds_count')).toBeGreaterThan(0);
  for (const r of [alongReplica, freshReplica]) expect((await r.stop()).code).toBe(0);
  // inspect names the mode and the key, and counts live rows as readers see them.
  const out = runBounded(process.execPath, [
    BIN,
    'inspect',
    '-c',
    along.file,
    '--data-dir',
    alongData,
    '--brokers',
    testBrokers().join(','),
    '--json',
  ]);
  expect(out.status).toBe(0);
  const report = JSON.parse(out.stdout) as InspectReport;
  expect(report.mode).toMatchObject({
    mode: 'upsert',
    key: ['_key'],
    tombstones: 'delete',
    liveRows: expected.size,
  });
  expect(report.mode.deletedRows).toBeGreaterThan(0);
  const human = runBounded(process.execPath, [
    BIN,
    'inspect',
    '-c',
    along.file,
    '--data-dir',
    alongData,
    '--brokers',
    testBrokers().join(','),
  ]);
  expect(human.stdout).toContain('Mode upsert on key (_key (the record key)), tombstones: delete');
}, 420_000);

test.each([
  ['staged', false, 'after-add'],
  ['published', false, 'after-add'],
  ['staged', true, 'after-add'],
  ['staged', false, 'before-add'],
] as const)(
  'commitAfter %s, streamed preparation %s: a replica SIGKILLed at %s (its publication `writing`), and again at a random instant, restarts on its data directory and ends with the newest value per key',
  async (commitAfter, pipelinePreparation, crashAt) => {
    const c = await upsertConsumer({
      offsets: { commitAfter },
      materializer: { maxPublicationDelayMs: 200, pollMs: 200, pipelinePreparation },
    });
    const dataDir = await fsp.mkdtemp(path.join(suite.work, 'data-killed-'));
    const first = workload(400, 4, 'k');
    await produceChanges(suite.kafka, c.topic, first);
    // Killed at its first publication's `before-add` (the ledger says `writing`, the merge not
    // run) or `after-add` (the merge is in Lance too).
    const crashed = await replica(c.file, 'crashed', dataDir, { KAFKA_LANCE_TEST_CRASH_AT: crashAt });
    const exit = await crashed.exited;
    expect(exit.signal).toBe('SIGKILL');
    const second = workload(400, 3, 'k').map((ch, i) =>
      ch.value === null || i % 3 !== 0 ? ch : { ...ch, value: ch.value.replace('round', 'again') },
    );
    const producing = produceChanges(suite.kafka, c.topic, second);
    const restarted = await replica(c.file, 'restarted', dataDir);
    await restarted.waitReady();
    await sleep(1_000 + Math.floor(Math.random() * 2_000));
    await restarted.kill('SIGKILL');
    await producing;
    const last = await replica(c.file, 'last', dataDir);
    await last.waitReady();
    const expected = latest([...first, ...second]);
    await untilEqual(c.lanceDir, expected);
    await waitForCommittedAtEnd(suite.admin, c.groupId, c.topic);
    // The publication the crash left `writing` was written again (idempotently), not counted.
    const resumed = [...restarted.logs, ...last.logs].filter((l) => l.event === 'publication.resume');
    expect(resumed.length).toBeGreaterThan(0);
    const stopped = await last.stop();
    if (stopped.code !== 0) console.error(JSON.stringify(stopped), last.tail(30));
    expect(stopped.code).toBe(0);
    expect(differences(await tableState(c.lanceDir), expected)).toEqual([]);
  },
  420_000,
);

test('a replica SIGKILLed before its merge, restarted after another replica published newer records of the same keys, replays its publication without bringing back an older value', async () => {
  const c = await upsertConsumer({ offsets: { commitAfter: 'staged' } });
  const crashedData = await fsp.mkdtemp(path.join(suite.work, 'data-replayed-'));
  const first = workload(200, 2, 'r');
  await produceChanges(suite.kafka, c.topic, first);
  const crashed = await replica(c.file, 'replayed', crashedData, { KAFKA_LANCE_TEST_CRASH_AT: 'before-add' });
  expect((await crashed.exited).signal).toBe('SIGKILL');
  // Newer records of the same keys, published by another replica while the first is down.
  const second = workload(200, 3, 'r').map((ch) =>
    ch.value === null ? ch : { ...ch, value: ch.value.replace('round', 'later') },
  );
  await produceChanges(suite.kafka, c.topic, second);
  const expected = latest([...first, ...second]);
  const other = await replica(c.file, 'other');
  await other.waitReady();
  await untilEqual(c.lanceDir, expected);
  await waitForCommittedAtEnd(suite.admin, c.groupId, c.topic);
  expect((await other.stop()).code).toBe(0);
  // The first replica's `writing` publication (older records) is published now, after them.
  const restarted = await replica(c.file, 'replayed-2', crashedData);
  await restarted.waitReady();
  await until(
    'the interrupted publication to be replayed',
    () => (restarted.logs.some((l) => l.event === 'publication.resume') ? true : undefined),
    60_000,
    200,
  );
  expect((await restarted.stop()).code).toBe(0);
  expect(differences(await tableState(c.lanceDir), expected)).toEqual([]);
}, 420_000);

/** Records a fresh reader finds in the topic now (tombstones included). */
async function countReadable(kafka: Kafka, topic: string): Promise<number> {
  return (await readLog(kafka, topic)).length;
}

/** The values a fresh reader finds in the topic now (null: a tombstone). */
async function readLog(kafka: Kafka, topic: string): Promise<(string | null)[]> {
  const admin = kafka.admin();
  await admin.connect();
  const consumer = kafka.consumer({ groupId: uniqueName('reader'), sessionTimeout: 10_000 });
  try {
    const ends = await admin.fetchTopicOffsets(topic);
    const high = new Map(ends.map((e) => [e.partition, Number(e.high)]));
    const seen: (string | null)[] = [];
    const done = new Set<number>();
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    for (const [p, h] of high) if (h === 0) done.add(p);
    await consumer.run({
      eachBatch: ({ batch }) => {
        for (const m of batch.messages) seen.push(m.value === null ? null : m.value.toString());
        const lastOffset = Number(batch.lastOffset());
        if (lastOffset + 1 >= (high.get(batch.partition) ?? 0)) done.add(batch.partition);
        return Promise.resolve();
      },
    });
    await until(
      'the reader to reach the log end',
      () => (done.size === high.size ? true : undefined),
      60_000,
    );
    return seen;
  } finally {
    await consumer.disconnect();
    await admin.disconnect();
  }
}

test('Debezium change events (JSON, with and without schemas.enable) through a replica SIGKILLed mid-run: the table ends equal to the source table', async () => {
  // A source table, changed the way Debezium reports it: a snapshot, inserts, updates, deletes
  // (each followed by its tombstone), primary-key updates (a delete and a create), and a
  // TOASTed column left out (REPLICA IDENTITY FULL: Debezium sends the full row).
  const source = new Map<number, { id: number; name: string; note: string | null }>();
  const events: { key: string; value: string | null }[] = [];
  let n = 0;
  const emit = (op: string, before: object | null, after: object | null, id: number) => {
    const payload = { before, after, source: { lsn: ++n }, op, ts_ms: Date.now() };
    const value =
      n % 2 === 0 ? JSON.stringify({ schema: { type: 'struct' }, payload }) : JSON.stringify(payload);
    events.push({ key: JSON.stringify({ id }), value });
  };
  const put = (op: 'r' | 'c' | 'u', id: number, name: string) => {
    const before = source.get(id) ?? null;
    const row = { id, name, note: id % 3 === 0 ? null : `note ${name}` };
    source.set(id, row);
    emit(op, before, row, id);
  };
  const remove = (id: number) => {
    emit('d', source.get(id)!, null, id);
    source.delete(id);
    events.push({ key: JSON.stringify({ id }), value: null });
  };
  for (let id = 1; id <= 300; id++) put('r', id, `snap ${id}`);
  for (let round = 0; round < 6; round++) {
    for (let id = 1; id <= 300; id++) {
      if (!source.has(id)) {
        if (round % 2 === 0) put('c', id, `new ${id}/${round}`);
      } else if ((id + round) % 11 === 0) remove(id);
      else if ((id + round) % 13 === 0) {
        // The primary key changes: a delete of the old id, a create of the new one.
        const row = source.get(id)!;
        remove(id);
        put('c', 1_000 + id * 10 + round, row.name);
      } else if ((id + round) % 2 === 0) put('u', id, `upd ${id}/${round}`);
    }
  }
  const lanceDir = path.join(suite.work, `${uniqueName('debezium')}-lance`);
  const c = await topicAndConsumer(suite, PARTITIONS, {
    schema: { fields: { id: 'int64', name: 'string', note: 'string' } },
    mode: 'upsert',
    key: { fields: ['id'] },
    envelope: 'debezium',
    lance: { uri: lanceDir },
    staging: { maxPartAgeMs: 300 },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const dataDir = await fsp.mkdtemp(path.join(suite.work, 'data-debezium-'));
  const half = Math.floor(events.length / 2);
  await produceChanges(suite.kafka, c.topic, events.slice(0, half));
  const first = await replica(c.file, 'debezium', dataDir);
  await first.waitReady();
  const producing = produceChanges(suite.kafka, c.topic, events.slice(half));
  await sleep(500 + Math.floor(Math.random() * 1_500));
  await first.kill('SIGKILL');
  await producing;
  const second = await replica(c.file, 'debezium-2', dataDir);
  await second.waitReady();
  const expected = new Map([...source.values()].map((r) => [r.id, JSON.stringify([r.id, r.name, r.note])]));
  let last: string[] = [];
  await until(
    'the table to equal the source table',
    async () => {
      const db = await lancedb.connect(lanceDir, { readConsistencyInterval: 0 });
      try {
        const opened = await openTableIfCommitted(db, 'logs');
        if (!opened) return undefined;
        const rows = (await opened
          .query()
          .where('_deleted = false')
          .select(['id', 'name', 'note'])
          .toArray()) as { id: bigint; name: string; note: string | null }[];
        const state = new Map(
          rows.map((r) => [Number(r.id), JSON.stringify([Number(r.id), r.name, r.note])]),
        );
        last = [];
        if (rows.length !== state.size) last.push(`${rows.length - state.size} keys held twice`);
        for (const [id, row] of expected)
          if (state.get(id) !== row) last.push(`${id}: ${state.get(id)} ≠ ${row}`);
        for (const [id, row] of state)
          if (!expected.has(id)) last.push(`${id}: ${row} (deleted at the source)`);
        return last.length === 0 ? true : undefined;
      } finally {
        db.close();
      }
    },
    Number(process.env.UPSERT_TEST_WAIT_MS ?? 180_000),
    500,
  ).catch((error: unknown) => {
    throw new Error(
      `${String(error)}; differences: ${last.slice(0, 10).join('; ')}; the replica's last lines:\n${second.tail(20)}`,
    );
  });
  await waitForCommittedAtEnd(suite.admin, c.groupId, c.topic);
  expect((await second.stop()).code).toBe(0);
}, 420_000);

test('a Debezium topic compacted while a replica was stopped: the tombstone left of a delete whose `d` event the cleaner removed deletes the key', async () => {
  const compacted = {
    'cleanup.policy': 'compact',
    'segment.bytes': '16384',
    'segment.ms': '100',
    'min.cleanable.dirty.ratio': '0.01',
    'min.compaction.lag.ms': '0',
    // Tombstones stay (a day): the `d` before each is removed, the tombstone is what is left.
    'delete.retention.ms': '86400000',
  };
  const lanceDir = path.join(suite.work, `${uniqueName('debezium-compacted')}-lance`);
  const c = await topicAndConsumer(
    suite,
    PARTITIONS,
    {
      schema: { fields: { id: 'int64', name: 'string', note: 'string' } },
      mode: 'upsert',
      key: { fields: ['id'] },
      envelope: 'debezium',
      lance: { uri: lanceDir },
      staging: { maxPartAgeMs: 300 },
      materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
    },
    compacted,
  );
  const event = (op: string, before: object | null, after: object | null) =>
    JSON.stringify({ before, after, source: { lsn: 0 }, op, ts_ms: Date.now() });
  const row = (id: number) => ({ id, name: `n${id}`, note: null });
  const key = (id: number) => JSON.stringify({ id });
  const ids = Array.from({ length: 60 }, (_, i) => i + 1);
  const liveIds = async (): Promise<number[] | undefined> => {
    const db = await lancedb.connect(lanceDir, { readConsistencyInterval: 0 });
    try {
      const t = await openTableIfCommitted(db, 'logs');
      if (!t) return undefined;
      const rows = (await t.query().where('_deleted = false').select(['id']).toArray()) as { id: bigint }[];
      t.close();
      return rows.map((r) => Number(r.id)).sort((a, b) => a - b);
    } finally {
      db.close();
    }
  };
  const untilLive = (expected: number[]) =>
    until(
      `the live keys to be ${expected.length} keys`,
      async () => (JSON.stringify(await liveIds()) === JSON.stringify(expected) ? true : undefined),
      180_000,
      500,
    ).catch(async (error: unknown) => {
      throw new Error(`${String(error)}; live: ${JSON.stringify(await liveIds())}`);
    });
  await produceChanges(
    suite.kafka,
    c.topic,
    ids.map((id) => ({ key: key(id), value: event('c', null, row(id)) })),
  );
  const dataDir = await fsp.mkdtemp(path.join(suite.work, 'data-debezium-compacted-'));
  const before = await replica(c.file, 'debezium-before', dataDir);
  await before.waitReady();
  await untilLive(ids);
  await waitForCommittedAtEnd(suite.admin, c.groupId, c.topic);
  expect((await before.stop()).code).toBe(0);

  // While the replica is stopped: every third key deleted (its `d`, then its tombstone).
  const deleted = ids.filter((id) => id % 3 === 0);
  await produceChanges(
    suite.kafka,
    c.topic,
    deleted.flatMap((id) => [
      { key: key(id), value: event('d', row(id), null) },
      { key: key(id), value: null },
    ]),
  );
  // segment.ms has passed: these roll new segments, and the deletes' become cleanable.
  await sleep(300);
  const roll = Array.from({ length: PARTITIONS * 4 }, (_, i) => ({ key: key(100_000 + i), value: null }));
  await produceChanges(suite.kafka, c.topic, roll);
  await until(
    'the cleaner to remove the delete events (their tombstones stay)',
    async () => {
      const log = await readLog(suite.kafka, c.topic);
      return log.some((v) => v?.includes('"op":"d"')) ? undefined : log.filter((v) => v === null).length;
    },
    120_000,
    2_000,
  );

  // The replica resumes on a log whose deletes are tombstones only.
  const after = await replica(c.file, 'debezium-after', dataDir);
  await after.waitReady();
  await waitForCommittedAtEnd(suite.admin, c.groupId, c.topic);
  await untilLive(ids.filter((id) => id % 3 !== 0));
  expect((await after.stop()).code).toBe(0);
}, 420_000);

test('keys that move partition when the topic grows (partitions 2 → 5) keep the newest value: the later record in the new partition wins over the old partition’s', async () => {
  const lanceDir = path.join(suite.work, `${uniqueName('grow')}-lance`);
  const topic = uniqueName('grow');
  await suite.admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true });
  const grown = await topicAndConsumer(suite, 1, {
    topics: [topic],
    mode: 'upsert',
    key: 'record-key',
    keyFormat: 'string',
    lance: { uri: lanceDir },
    staging: { maxPartAgeMs: 300 },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const before = workload(200, 2, 'mv');
  await produceChanges(suite.kafka, topic, before);
  const r = await replica(grown.file, 'grow');
  await untilEqual(lanceDir, latest(before));
  // The default partitioner hashes the key modulo the partition count: most keys move. A
  // replica takes added partitions at its group's next join: this one restarts (kafkajs
  // refreshes a live member's topic metadata only every few minutes).
  await suite.admin.createPartitions({ topicPartitions: [{ topic, count: 5 }] });
  await untilHosted(suite.admin, topic, 5);
  expect((await r.stop()).code).toBe(0);
  const r2 = await replica(grown.file, 'grow-2');
  await r2.waitReady();
  const after = workload(200, 2, 'mv').map((ch) =>
    ch.value === null ? ch : { ...ch, value: ch.value.replace('round', 'moved round') },
  );
  await produceChanges(suite.kafka, topic, after);
  const expected = latest([...before, ...after]);
  await untilEqual(lanceDir, expected);
  // The keys did move: rows of the new partitions hold most of them.
  const db = await lancedb.connect(lanceDir);
  const moved = await (await db.openTable('logs')).countRows('_partition >= 2 AND _deleted = false');
  db.close();
  expect(moved).toBeGreaterThan(expected.size / 3);
  await waitForCommittedAtEnd(suite.admin, grown.groupId, topic);
  expect((await r2.stop()).code).toBe(0);
}, 420_000);
