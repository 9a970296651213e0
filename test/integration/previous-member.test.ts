import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { memberRecordFile, type MemberRecord } from '../../src/kafka/previous-member';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { assignedOf, checkFaultRun, settle, until, waitForJoin, type Named } from '../support/faults';
import { produceRecords } from '../support/ingestion-fixture';
import { testBrokers } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';

/**
 * A replica restarted after a crash of its own (SIGKILL, OOM) on the same data directory:
 * kafkajs 2.2.4 has no static membership, so the dead member would hold its partitions
 * (and the group's rebalance) until its session expired. The restarted replica leaves the
 * group as that member first. Real replica processes on the real broker; run after
 * `npm run build` (replicas run from dist/).
 */
const suite = brokerSuite('kl-previous-member');
const PARTITIONS = 2;
/** Long enough that a join before it expires can only come from the old member having left. */
const SESSION_MS = 60_000;
const HEARTBEAT_MS = 1_000;

async function recordIn(dataDir: string): Promise<MemberRecord | undefined> {
  const text = await fsp.readFile(memberRecordFile(dataDir), 'utf8').catch(() => undefined);
  return text === undefined ? undefined : (JSON.parse(text) as MemberRecord);
}

test('a replica restarted after its own SIGKILL does not wait for its dead member session: it leaves as that member, the group holds only the new one, every record lands once', async () => {
  const lanceDir = path.join(suite.work, 'lance');
  const { topic, groupId, file } = await topicAndConsumer(suite, PARTITIONS, {
    lance: { uri: lanceDir },
    staging: { maxPartBytes: 4 * 1024 * 1024, maxPartAgeMs: 500 },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
    sessionTimeoutMs: SESSION_MS,
    // The coordinator would also drop a member that does not rejoin within a rebalance.
    rebalanceTimeoutMs: SESSION_MS,
    heartbeatIntervalMs: HEARTBEAT_MS,
  });
  const dataDir = await fsp.mkdtemp(path.join(suite.work, 'data-'));
  const produced = await produceRecords(suite.kafka, topic, PARTITIONS, 500);

  const a: Named = { label: 'A', process: new ReplicaProcess(file, dataDir, testBrokers()) };
  await waitForJoin(a.process, 0, (j) => assignedOf(j).length === PARTITIONS);
  await until('A consumed and committed', async () => {
    const [committed] = await suite.admin.fetchOffsets({ groupId, topics: [topic] });
    return committed!.partitions.some((p) => Number(p.offset) > 0) || undefined;
  });
  const old = await until('A recorded its membership', () => recordIn(dataDir));
  expect(old.groupId).toBe(groupId);
  await a.process.kill('SIGKILL');
  const killedAt = Date.now();
  // The dead member is still in the group: its session runs.
  const [before] = (await suite.admin.describeGroups([groupId])).groups;
  expect(before!.members.map((m) => m.memberId)).toContain(old.memberId);

  const b: Named = { label: 'A2', process: new ReplicaProcess(file, dataDir, testBrokers()) };
  await waitForJoin(b.process, 0, (j) => assignedOf(j).length === PARTITIONS, SESSION_MS * 2);
  const joinedAt = Date.now();
  // Semantic, not a speed limit: the old session cannot have expired before its last
  // heartbeat plus sessionTimeoutMs, so a join with every partition before then means the
  // old member was taken out of the group by the leave.
  expect(joinedAt - killedAt).toBeLessThan(SESSION_MS - HEARTBEAT_MS);
  expect(b.process.logs.some((l) => l.event === 'group.previousMember' && l.memberId === old.memberId)).toBe(
    true,
  );

  const [group] = (await suite.admin.describeGroups([groupId])).groups;
  const members = group!.members.map((m) => m.memberId);
  expect(members).not.toContain(old.memberId);
  expect(members).toHaveLength(1);
  const current = await until('A2 recorded its membership', () => recordIn(dataDir));
  expect(members).toEqual([current.memberId]);

  produced.push(...(await produceRecords(suite.kafka, topic, PARTITIONS, 500, undefined, produced.length)));
  const settled = await settle(suite.admin, groupId, topic, lanceDir, produced.length, { quietMs: 8_000 });
  expect((await b.process.kill('SIGTERM')).code).toBe(0);
  // A graceful stop left the group itself: nothing for the next start to end.
  expect(await recordIn(dataDir)).toBeUndefined();
  const report = await checkFaultRun({
    admin: suite.admin,
    groupId,
    topic,
    lanceDir,
    produced,
    replicas: [a, b],
    problems: settled.problems,
  });
  console.log(`${report.lines.join('\n')}\n${report.problems.join('\n') || 'no problems'}`);
  expect(report.problems).toEqual([]);
}, 300_000);
