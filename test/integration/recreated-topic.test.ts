import * as lancedb from '@lancedb/lancedb';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { brokerSuite, topicAndConsumer, untilHosted } from '../support/broker-suite';
import { sleep, until } from '../support/faults';
import { produceRecords, writeConsumer } from '../support/ingestion-fixture';
import { testBrokers, uniqueName } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { openTableIfCommitted } from '../../src/lance/open-if-committed';

/**
 * A topic deleted and recreated with the same name starts its offsets at 0 again, so
 * its records have the (_topic, _partition, _offset) of records of the old incarnation
 * already in the table. Keyed by that triple alone, 'published' mode's insert-if-absent
 * inserts nothing for them (silently lost) and 'staged' mode's settled count finds more
 * rows than the publication holds (PartialPublicationError: the replica exits, and again
 * after each restart). Real broker, real replica processes: N records published, the
 * topic deleted and recreated, M < N records produced (their offsets all overlap the old
 * ones), the replica restarted on the same data directory: the table must hold N + M
 * rows, the M new ones each exactly once, told apart from the old ones by `_topic_id`,
 * and the replica must run on and stop cleanly. Run after `npm run build`.
 */
const suite = brokerSuite('kl-recreated');
const PARTITIONS = 2;
const N = 1_000;
const M = 400;

interface Row {
  readonly n: number;
  readonly topicId: string | null;
  readonly partition: number;
  readonly offset: number;
}

async function tableRows(lanceDir: string): Promise<Row[]> {
  const db = await lancedb.connect(lanceDir);
  try {
    const table = await openTableIfCommitted(db, 'logs');
    if (!table) return [];
    const hasId = (await table.schema()).fields.some((f) => f.name === '_topic_id');
    const rows = await table
      .query()
      .select(['n', '_partition', '_offset', ...(hasId ? ['_topic_id'] : [])])
      .toArray();
    return rows.map((r: Record<string, unknown>) => ({
      n: Number(r.n),
      topicId: hasId ? (r._topic_id as string | null) : null,
      partition: Number(r._partition),
      offset: Number(r._offset),
    }));
  } finally {
    db.close();
  }
}

async function rowCount(lanceDir: string): Promise<number> {
  const db = await lancedb.connect(lanceDir);
  try {
    const opened = await openTableIfCommitted(db, 'logs');
    if (!opened) return 0;
    return await opened.countRows();
  } finally {
    db.close();
  }
}

/** Deletes the topic and creates it again under the same name, once the broker has let go of it. */
async function recreate(topic: string): Promise<void> {
  await suite.admin.deleteTopics({ topics: [topic], timeout: 30_000 });
  await until(
    `topic ${topic} deleted`,
    async () => ((await suite.admin.listTopics()).includes(topic) ? undefined : true),
    30_000,
  );
  await until(
    `topic ${topic} created again`,
    async () => {
      try {
        await suite.admin.createTopics({
          topics: [{ topic, numPartitions: PARTITIONS }],
          waitForLeaders: true,
        });
        return true;
      } catch {
        // TOPIC_ALREADY_EXISTS while the deletion is still being finished.
        return undefined;
      }
    },
    30_000,
    500,
  );
  await untilHosted(suite.admin, topic, PARTITIONS);
}

/** Waits until the table holds `rows` rows (or the time is up), then a short quiet period. */
async function untilRows(
  lanceDir: string,
  rows: number,
  replicas: readonly ReplicaProcess[],
): Promise<boolean> {
  let reached = false;
  let exited = false;
  for (const r of replicas) void r.exited.then(() => (exited = true));
  try {
    await until(
      `${rows} rows in the table`,
      async () => (exited ? true : (await rowCount(lanceDir)) >= rows ? (reached = true) : undefined),
      90_000,
      500,
    );
  } catch {
    // Reported with what the table holds.
  }
  // A late duplicate would show in the final check.
  if (reached) await sleep(2_000);
  return reached;
}

/** Stops the replicas (SIGTERM) and tells how each ended: an exit before it was asked is a failure. */
async function stopAll(replicas: readonly ReplicaProcess[]): Promise<string[]> {
  const ended: string[] = [];
  for (const r of replicas) {
    const before = await Promise.race([r.exited, sleep(0).then(() => undefined)]);
    const exit = before ?? (await r.kill('SIGTERM'));
    ended.push(before ? `exited by itself (${JSON.stringify(before)})` : `stopped with code ${exit.code}`);
  }
  return ended;
}

type Scenario = 'stopped' | 'consuming';

async function deletedAndRecreated(mode: 'staged' | 'published', scenario: Scenario): Promise<void> {
  const lanceDir = path.join(suite.work, `${uniqueName(mode)}-lance`);
  const { topic, file } = await topicAndConsumer(suite, PARTITIONS, {
    offsets: { commitAfter: mode },
    staging: { maxPartBytes: 4 * 1024 * 1024, maxPartAgeMs: 500 },
    lance: { uri: lanceDir },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const dataDir = () => fsp.mkdtemp(path.join(suite.work, `data-${mode}-`));
  const first = await dataDir();

  await produceRecords(suite.kafka, topic, PARTITIONS, N);
  const a = new ReplicaProcess(file, first, testBrokers());
  expect(await untilRows(lanceDir, N, [a])).toBe(true);
  const replicas = [a];
  if (scenario === 'stopped') {
    expect(await stopAll([a])).toEqual(['stopped with code 0']);
    replicas.length = 0;
  }

  await recreate(topic);
  // Records N..N+M-1 at offsets 0..M/PARTITIONS-1: every one has an old row's (topic, partition, offset).
  await produceRecords(suite.kafka, topic, PARTITIONS, M, undefined, N);
  if (scenario === 'stopped') {
    // The same replica restarted on its data directory, and a second one joining it.
    replicas.push(new ReplicaProcess(file, first, testBrokers()));
    replicas.push(new ReplicaProcess(file, await dataDir(), testBrokers()));
  }
  await untilRows(lanceDir, N + M, replicas);
  const ended = await stopAll(replicas);

  const rows = await tableRows(lanceDir);
  const fatal = replicas.flatMap((r) =>
    r.logs
      .filter((l) => l.event === 'materializer.fatal' || l.event === 'replica.failed' || l.level >= 60)
      .map((l) => `${l.event ?? ''} ${l.msg ?? ''}`),
  );
  const perN = new Map<number, Row[]>();
  for (const r of rows) perN.set(r.n, [...(perN.get(r.n) ?? []), r]);
  const newRows = rows.filter((r) => r.n >= N);
  const oldIds = new Set(rows.filter((r) => r.n < N).map((r) => r.topicId));
  const newIds = new Set(newRows.map((r) => r.topicId));
  const summary = {
    rows: rows.length,
    missingNew: Array.from({ length: M }, (_, i) => N + i).filter((n) => !perN.has(n)).length,
    missingOld: Array.from({ length: N }, (_, i) => i).filter((n) => !perN.has(n)).length,
    doubled: [...perN.values()].filter((rs) => rs.length > 1).length,
    ended,
    fatal,
    oldIds: oldIds.size,
    newIds: newIds.size,
    newIdsNull: newIds.has(null),
    sameIdOldAndNew: [...newIds].some((id) => oldIds.has(id)),
  };
  console.log(JSON.stringify({ mode, scenario, ...summary }));
  expect(summary).toEqual({
    rows: N + M,
    missingNew: 0,
    missingOld: 0,
    doubled: 0,
    ended: replicas.map(() => 'stopped with code 0'),
    fatal: [],
    oldIds: 1,
    newIds: 1,
    newIdsNull: false,
    sameIdOldAndNew: false,
  });
  // The new rows really are at the old rows' offsets: only the incarnation tells them apart.
  expect(newRows.every((r) => r.offset < M / PARTITIONS)).toBe(true);
}

for (const mode of ['staged', 'published'] as const) {
  test(`commitAfter '${mode}': a topic deleted and recreated while the group is stopped reuses old offsets; restarted replicas land each new record once, beside the old ones, and run on`, async () => {
    await deletedAndRecreated(mode, 'stopped');
  }, 300_000);

  test(`commitAfter '${mode}': a topic deleted and recreated under a consuming replica (no rebalance, old fetch position) is noticed; its new records land once and the replica runs on`, async () => {
    await deletedAndRecreated(mode, 'consuming');
  }, 300_000);
}

test("commitAfter 'staged': rows of the deleted incarnation still staged by a killed replica (committed, not yet published) are held, never published as the recreated topic's; the new records land once", async () => {
  const lanceDir = path.join(suite.work, `${uniqueName('held')}-lance`);
  const { topic, file, groupId } = await topicAndConsumer(suite, PARTITIONS, {
    staging: { maxPartBytes: 4 * 1024 * 1024, maxPartAgeMs: 500 },
    lance: { uri: lanceDir },
    // Nothing is published in the first run: its parts stay staged.
    materializer: { maxPublicationDelayMs: 600_000, pollMs: 200 },
  });
  const data = await fsp.mkdtemp(path.join(suite.work, 'data-held-'));
  await produceRecords(suite.kafka, topic, PARTITIONS, N);
  const a = new ReplicaProcess(file, data, testBrokers());
  await until(
    'the old incarnation committed (staged, not published)',
    async () => {
      const [c] = await suite.admin.fetchOffsets({ groupId, topics: [topic] });
      return c!.partitions.every((p) => Number(p.offset) === N / PARTITIONS) ? true : undefined;
    },
    60_000,
    500,
  );
  // Killed: a graceful stop drains what it committed (DESIGN.md, "Scale-down and old epochs").
  expect((await a.kill('SIGKILL')).signal).toBe('SIGKILL');
  expect(await rowCount(lanceDir)).toBe(0);

  await recreate(topic);
  await produceRecords(suite.kafka, topic, PARTITIONS, M, undefined, N);
  const definition = JSON.parse(await fsp.readFile(file, 'utf8')) as Record<string, unknown>;
  await writeConsumer(suite.work, {
    ...definition,
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const b = new ReplicaProcess(file, data, testBrokers());
  await untilRows(lanceDir, M, [b]);
  await sleep(3_000); // a held part published late would show
  const ended = await stopAll([b]);

  const rows = await tableRows(lanceDir);
  const join = b.logs.find((l) => l.event === 'kafka.join');
  const newId = (join?.claimed as { topicId?: string }[] | undefined)?.[0]?.topicId;
  const held = b.logs
    .filter((l) => l.event === 'publication.unresolvable')
    .flatMap((l) => l.parts as { topicId?: string }[]);
  const summary = {
    rows: rows.length,
    distinctNew: new Set(rows.filter((r) => r.n >= N).map((r) => r.n)).size,
    old: rows.filter((r) => r.n < N).length,
    ids: [...new Set(rows.map((r) => r.topicId))],
    heldParts: held.length > 0,
    heldIds: [...new Set(held.map((p) => p.topicId))].filter((id) => id === newId).length,
    ended,
  };
  console.log(JSON.stringify({ scenario: 'held', newId, ...summary }));
  expect(summary).toEqual({
    rows: M,
    distinctNew: M,
    old: 0,
    ids: [newId],
    heldParts: true,
    heldIds: 0,
    ended: ['stopped with code 0'],
  });
}, 300_000);

test("commitAfter 'published': a second group writing the same topic into the same table (a blue/green rebuild) inserts nothing twice and runs on", async () => {
  const lanceDir = path.join(suite.work, `${uniqueName('bluegreen')}-lance`);
  const blue = await topicAndConsumer(suite, PARTITIONS, {
    offsets: { commitAfter: 'published' },
    staging: { maxPartBytes: 4 * 1024 * 1024, maxPartAgeMs: 500 },
    lance: { uri: lanceDir },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const definition = JSON.parse(await fsp.readFile(blue.file, 'utf8')) as Record<string, unknown>;
  const green = await writeConsumer(suite.work, { ...definition, name: `${blue.name}green` });
  await produceRecords(suite.kafka, blue.topic, PARTITIONS, N);
  const replicas = [
    new ReplicaProcess(blue.file, await fsp.mkdtemp(path.join(suite.work, 'data-blue-')), testBrokers()),
    new ReplicaProcess(green, await fsp.mkdtemp(path.join(suite.work, 'data-green-')), testBrokers()),
  ];
  await untilRows(lanceDir, N, replicas);
  // Both groups at the log end: the second one's publications were all made.
  await until(
    'both groups committed to the log end',
    async () => {
      for (const groupId of [blue.groupId, `kafka-lance-${blue.name}green`]) {
        const [c] = await suite.admin.fetchOffsets({ groupId, topics: [blue.topic] });
        if (!c!.partitions.every((p) => Number(p.offset) === N / PARTITIONS)) return undefined;
      }
      return true;
    },
    90_000,
    500,
  );
  await sleep(2_000);
  const ended = await stopAll(replicas);
  const rows = await tableRows(lanceDir);
  expect({ rows: rows.length, distinct: new Set(rows.map((r) => r.n)).size, ended }).toEqual({
    rows: N,
    distinct: N,
    ended: ['stopped with code 0', 'stopped with code 0'],
  });
}, 300_000);
