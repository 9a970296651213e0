import * as lancedb from '@lancedb/lancedb';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { brokerSuite, topicAndConsumer, untilHosted } from '../support/broker-suite';
import { sleep, until } from '../support/faults';
import { produceRecords } from '../support/ingestion-fixture';
import { testBrokers, uniqueName } from '../support/kafka';
import { ReplicaProcess } from '../support/replica-process';

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
    if (!(await db.tableNames()).includes('logs')) return [];
    const table = await db.openTable('logs');
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
    if (!(await db.tableNames()).includes('logs')) return 0;
    return await (await db.openTable('logs')).countRows();
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

/** Runs a replica until the table holds `rows` rows (or the time is up), then SIGTERMs it. */
async function runUntil(
  file: string,
  dataDir: string,
  lanceDir: string,
  rows: number,
): Promise<{ replica: ReplicaProcess; reached: boolean; exitedEarly: boolean; code: number | null }> {
  const replica = new ReplicaProcess(file, dataDir, testBrokers());
  let exitedEarly = false;
  void replica.exited.then(() => (exitedEarly = true));
  let reached = false;
  try {
    await until(
      `${rows} rows in the table`,
      async () => (exitedEarly ? true : (await rowCount(lanceDir)) >= rows ? (reached = true) : undefined),
      90_000,
      500,
    );
  } catch {
    // Reported below with what the table holds.
  }
  const early = exitedEarly;
  // A short quiet period: a late duplicate would show in the final check.
  if (reached) await sleep(2_000);
  const exit = early ? await replica.exited : await replica.kill('SIGTERM');
  return { replica, reached, exitedEarly: early, code: exit.code };
}

for (const mode of ['staged', 'published'] as const) {
  test(`commitAfter '${mode}': records of a topic deleted and recreated under the same name reuse old offsets; each new one lands once, beside the old ones, and the replica runs on`, async () => {
    const lanceDir = path.join(suite.work, `${uniqueName(mode)}-lance`);
    const { topic, file } = await topicAndConsumer(suite, PARTITIONS, {
      offsets: { commitAfter: mode },
      staging: { maxPartBytes: 4 * 1024 * 1024, maxPartAgeMs: 500 },
      lance: { uri: lanceDir },
      materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
    });
    const dataDir = await fsp.mkdtemp(path.join(suite.work, `data-${mode}-`));

    await produceRecords(suite.kafka, topic, PARTITIONS, N);
    const first = await runUntil(file, dataDir, lanceDir, N);
    expect({ reached: first.reached, code: first.code }).toEqual({ reached: true, code: 0 });

    await recreate(topic);
    // Records N..N+M-1 at offsets 0..M/PARTITIONS-1: every one has an old row's (topic, partition, offset).
    await produceRecords(suite.kafka, topic, PARTITIONS, M, undefined, N);
    const second = await runUntil(file, dataDir, lanceDir, N + M);

    const rows = await tableRows(lanceDir);
    const fatal = second.replica.logs.filter(
      (l) => l.event === 'materializer.fatal' || l.event === 'replica.fatal' || (l.level >= 60 && !!l.msg),
    );
    const perN = new Map<number, Row[]>();
    for (const r of rows) perN.set(r.n, [...(perN.get(r.n) ?? []), r]);
    const newRows = rows.filter((r) => r.n >= N);
    const oldIds = new Set(rows.filter((r) => r.n < N).map((r) => r.topicId));
    const newIds = new Set(newRows.map((r) => r.topicId));
    const summary = {
      mode,
      rows: rows.length,
      missingNew: Array.from({ length: M }, (_, i) => N + i).filter((n) => !perN.has(n)).length,
      missingOld: Array.from({ length: N }, (_, i) => i).filter((n) => !perN.has(n)).length,
      doubled: [...perN.values()].filter((rs) => rs.length > 1).length,
      exitedEarly: second.exitedEarly,
      exitCode: second.code,
      fatal: fatal.map((l) => `${l.event ?? ''} ${l.msg ?? ''}`),
      oldIds: oldIds.size,
      newIds: newIds.size,
      newIdsNull: newIds.has(null),
      sameIdOldAndNew: [...newIds].some((id) => oldIds.has(id)),
    };
    console.log(JSON.stringify(summary));
    expect(summary).toEqual({
      mode,
      rows: N + M,
      missingNew: 0,
      missingOld: 0,
      doubled: 0,
      exitedEarly: false,
      exitCode: 0,
      fatal: [],
      oldIds: 1,
      newIds: 1,
      newIdsNull: false,
      sameIdOldAndNew: false,
    });
    // The new rows really are at the old rows' offsets: only the incarnation tells them apart.
    expect(newRows.every((r) => r.offset < M / PARTITIONS)).toBe(true);
  }, 300_000);
}
