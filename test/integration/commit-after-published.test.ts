import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { assignedOf, checkFaultRun, settle, until, waitForJoin, type Named } from '../support/faults';
import { produceRecords } from '../support/ingestion-fixture';
import { testBrokers, uniqueName } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';

/**
 * `offsets.commitAfter: 'published'` puts rows into Lance before their offsets are
 * committed, so the ceiling rule no longer keeps two owners' rows apart. The race, with
 * real processes on the real broker: replica A freezes itself (SIGSTOP, test hook
 * KAFKA_LANCE_TEST_STOP_AT=before-add) inside its first publication, after `writing`
 * and just before the Lance write; nothing of it is committed. Its session expires, B
 * takes every partition from the old commit, publishes the same records and commits
 * them. Then A is SIGCONTed and finishes its write, late. With plain appends that write
 * doubles the rows; with insert-if-absent on the row key it inserts nothing. The run
 * ends with the fault tests' check: every record exactly once, commits at the log end,
 * every claim in the chains. Run after `npm run build` (replicas run from dist/).
 */
const suite = brokerSuite('kl-commit-after');
const PARTITIONS = 2;
const RECORDS = 3_000;

test("commitAfter 'published': a replica frozen inside its publication finishes it after the next owner published the same records; each is in Lance once", async () => {
  const lanceDir = path.join(suite.work, `${uniqueName('published')}-lance`);
  const { topic, groupId, file } = await topicAndConsumer(suite, PARTITIONS, {
    offsets: { commitAfter: 'published' },
    staging: { maxPartBytes: 4 * 1024 * 1024, maxPartAgeMs: 500 },
    lance: { uri: lanceDir },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const { admin, kafka } = suite;
  const produced = await produceRecords(kafka, topic, PARTITIONS, RECORDS);
  const dataDir = (label: string) => fsp.mkdtemp(path.join(suite.work, `data-${label}-`));
  const a: Named = {
    label: 'A',
    process: new ReplicaProcess(file, await dataDir('A'), testBrokers(), {
      KAFKA_LANCE_TEST_STOP_AT: 'before-add',
    }),
  };
  const aJoin = await waitForJoin(a.process, 0, (j) => assignedOf(j).length === PARTITIONS);
  const starts = (aJoin.claimed as { partition: number; start: number }[]).map((c) => c.start);
  await a.process.waitForEvent('test.stopped-at', 60_000);

  // A is frozen with its first publication marked `writing`: in 'published' mode none
  // of its records may be committed yet (the staged rule would have committed them).
  const [held] = await admin.fetchOffsets({ groupId, topics: [topic] });
  expect(held!.partitions.map((p) => Number(p.offset)).sort()).toEqual(starts.sort());

  const b: Named = { label: 'B', process: new ReplicaProcess(file, await dataDir('B'), testBrokers()) };
  await waitForJoin(b.process, 0, (j) => assignedOf(j).length === PARTITIONS);
  // B consumed from the old commit and published every record; its commits follow.
  const bySettled = await settle(admin, groupId, topic, lanceDir, produced.length, { quietMs: 5_000 });
  expect(bySettled.problems).toEqual([]);

  // A wakes up and writes its publication, late: the rows are already there. Its end
  // is a publication, or (rows doubled by a plain append) the table stopped.
  const from = a.process.logs.length;
  process.kill(a.process.pid, 'SIGCONT');
  const late = await until(
    "the end of A's late publication",
    () =>
      a.process.logs.slice(from).find((l) => l.event === 'publication' || l.event === 'materializer.fatal'),
    60_000,
  );

  const settled = await settle(admin, groupId, topic, lanceDir, produced.length, { quietMs: 8_000 });
  const exits: string[] = [];
  for (const r of late.event === 'publication' ? [a, b] : [b]) {
    const exit = await r.process.kill('SIGTERM');
    if (exit.code !== 0) exits.push(`${r.label} exited ${JSON.stringify(exit)} on SIGTERM`);
  }
  const report = await checkFaultRun({
    admin,
    groupId,
    topic,
    lanceDir,
    produced,
    replicas: [a, b],
    problems: [...settled.problems, ...exits],
  });
  console.log(
    `late publication of A: ${late.event === 'publication' ? `${late.rows as number} rows` : String(late.reason)}\n${report.lines.join('\n')}${
      report.problems.length > 0 ? `\nPROBLEMS:\n- ${report.problems.join('\n- ')}` : '\nno problems'
    }`,
  );
  expect(report.problems).toEqual([]);
  expect(late.event).toBe('publication');
}, 240_000);
