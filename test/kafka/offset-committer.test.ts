import type { Consumer } from 'kafkajs';
import { createLogger } from '../../src/common/logger';
import type { CommitOffset } from '../../src/common/offsets';
import { IngestionMetrics } from '../../src/kafka/ingestion-events';
import { OffsetCommitter } from '../../src/kafka/offset-committer';
import { Metrics } from '../../src/metrics/metrics';
import { CommitFence } from '../../src/ownership/commit-fence';
import { GroupMembership } from '../../src/ownership/membership';
import type { PartitionCommit } from '../../src/ownership/offset-tracker';

const GROUP = 'g';
const commit = (partition: number, offset: number): PartitionCommit => ({
  topic: 't',
  partition,
  offset: offset as CommitOffset,
  metadata: 'chain',
});

type Broker = 'answers' | 'refuses' | 'not-running';

/**
 * The committer with the real membership and fence, and a fake kafkajs consumer that
 * goes through the fence's hook as the coordinator hook does: checked before sending,
 * answered when the broker answers (or refused, or never sent while kafkajs restarts).
 */
function harness() {
  const metrics = new Metrics();
  const events = new IngestionMetrics(metrics);
  const membership = new GroupMembership();
  const fence = new CommitFence(membership, GROUP);
  const landed: PartitionCommit[][] = [];
  const sent: { offset: string; metadata: string | null | undefined }[][] = [];
  const broker = { now: 'answers' as Broker, generationId: 1 };
  const consumer = {
    commitOffsets: (offsets: { partition: number; offset: string; metadata?: string | null }[]) => {
      if (broker.now === 'not-running') return Promise.resolve();
      const attempt = {
        groupId: GROUP,
        memberId: 'm',
        groupGenerationId: broker.generationId,
        topics: [{ partitions: offsets.map((o) => ({ metadata: o.metadata })) }],
      };
      fence.check(attempt);
      sent.push(offsets.map((o) => ({ offset: o.offset, metadata: o.metadata })));
      if (broker.now === 'refuses') return Promise.reject(new Error('REBALANCE_IN_PROGRESS'));
      fence.answered(attempt);
      return Promise.resolve();
    },
  } as unknown as Consumer;
  const committer = new OffsetCommitter(
    {
      membership,
      fence,
      tracker: { landed: (commits) => void landed.push([...commits]) },
      logger: createLogger({ level: 'silent' }),
      events,
    },
    consumer,
  );
  const join = () => {
    membership.synced('m', broker.generationId);
    return membership.joined();
  };
  const committedGauge = async () =>
    (await metrics.committedOffset.get()).values.map((v) => [v.labels.partition, v.value]);
  return { committer, events, landed, sent, broker, join, committedGauge, fence };
}

test('a commit the broker answers is recorded as landed, counted, and its offsets shown per partition', async () => {
  const { committer, events, landed, sent, join, committedGauge } = harness();
  join();
  await committer.commit([commit(0, 10), commit(1, 20)]);
  expect(sent).toEqual([
    [
      { offset: '10', metadata: 'chain' },
      { offset: '20', metadata: 'chain' },
    ],
  ]);
  expect(landed).toEqual([[commit(0, 10), commit(1, 20)]]);
  expect(events.counts).toMatchObject({ commits: 1, refusedCommits: 0, unsentCommits: 0 });
  expect(await committedGauge()).toEqual([
    ['0', 10],
    ['1', 20],
  ]);
});

test('a commit the broker refuses is never recorded as landed (the next tick decides it again)', async () => {
  const { committer, events, landed, broker, join, committedGauge } = harness();
  join();
  broker.now = 'refuses';
  await committer.commit([commit(0, 10)]);
  expect(landed).toEqual([]);
  expect(events.counts).toMatchObject({ commits: 0, refusedCommits: 1 });
  expect(await committedGauge()).toEqual([]);
});

test('a commit kafkajs returns from without sending (its runner restarting) is not recorded as landed', async () => {
  const { committer, events, landed, broker, join } = harness();
  join();
  broker.now = 'not-running';
  await committer.commit([commit(0, 10)]);
  expect(landed).toEqual([]);
  expect(events.counts).toMatchObject({ commits: 0, unsentCommits: 1 });
});

test('a commit decided in one generation is refused before it goes out in the next', async () => {
  const { committer, events, landed, sent, broker, join } = harness();
  join();
  // The coordinator moved the group on (SyncGroup of generation 2) before our join handler took it.
  broker.generationId = 2;
  await committer.commit([commit(0, 10)]);
  expect(sent).toEqual([]);
  expect(landed).toEqual([]);
  expect(events.counts).toMatchObject({ refusedCommits: 1 });
});

test('nothing is sent before the first join, nor for an empty commit', async () => {
  const { committer, sent, join } = harness();
  await committer.commit([commit(0, 10)]);
  join();
  await committer.commit([]);
  expect(sent).toEqual([]);
});

test('send (a join claim, inside its own fence turn) commits exactly the given offsets with their chains, without recording a data commit', async () => {
  const { committer, events, landed, sent, join, fence } = harness();
  const generation = join();
  expect(await fence.commit(generation, () => committer.send([commit(3, 7)]))).toEqual({ kind: 'landed' });
  expect(sent).toEqual([[{ offset: '7', metadata: 'chain' }]]);
  expect(landed).toEqual([]);
  expect(events.counts.commits).toBe(0);
});
