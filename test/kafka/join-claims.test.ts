import type { Admin, Consumer } from 'kafkajs';
import { createLogger } from '../../src/common/logger';
import type { ResolvedConsumer } from '../../src/config';
import type { DeadLetterOutbox } from '../../src/dead-letters/dead-letter-outbox';
import { IngestionMetrics } from '../../src/kafka/ingestion-events';
import { JoinClaims, type JoinClaimsDeps } from '../../src/kafka/join-claims';
import { Metrics } from '../../src/metrics/metrics';
import type { CommittedOffset } from '../../src/ownership/claim';
import { decodeChain } from '../../src/ownership/chain';
import { CommitFence } from '../../src/ownership/commit-fence';
import { GroupMembership } from '../../src/ownership/membership';
import { OffsetTracker, type PartitionCommit } from '../../src/ownership/offset-tracker';
import type { PartitionOffset } from '../../src/pool/protocol';
import type { StagingEpoch } from '../../src/staging/epoch';

const GROUP = 'g';

/**
 * JoinClaims with the real ownership rules (membership, fence, tracker) and recording
 * fakes of kafkajs's consumer, the broker's committed offsets, the staging pool and the
 * fetch positions. A claim's commit "lands" when the fake committer's send resolves
 * (the broker answered it), unless the test makes the broker refuse it.
 */
function harness(
  committed: Record<string, CommittedOffset | undefined>,
  options: { fromBeginning?: boolean } = {},
) {
  const metrics = new Metrics();
  const events = new IngestionMetrics(metrics);
  const membership = new GroupMembership();
  const fence = new CommitFence(membership, GROUP);
  const tracker = new OffsetTracker();
  const broker = { refuseClaims: 0, generationId: 1 };
  const calls = {
    sent: [] as PartitionCommit[][],
    seeks: [] as string[],
    positions: [] as [string, number, number, number][],
    epochs: [] as {
      epoch: StagingEpoch;
      revoked: readonly PartitionOffset[];
      assigned: readonly PartitionOffset[];
    }[],
    paused: [] as unknown[],
    failed: [] as unknown[],
  };
  const consumer = {
    pause: (what: unknown) => void calls.paused.push(what),
    paused: () => [],
    resume: () => undefined,
    seek: ({ topic, partition, offset }: { topic: string; partition: number; offset: string }) =>
      void calls.seeks.push(`${topic}[${partition}]@${offset}`),
  } as unknown as Consumer;
  const committer = {
    send: (commits: readonly PartitionCommit[]) => {
      calls.sent.push([...commits]);
      if (broker.refuseClaims > 0) {
        broker.refuseClaims -= 1;
        return Promise.reject(new Error('NOT_COORDINATOR'));
      }
      fence.answered({ groupId: GROUP, memberId: 'm', groupGenerationId: broker.generationId });
      return Promise.resolve();
    },
  };
  const deps: JoinClaimsDeps = {
    consumer: {
      groupId: GROUP,
      topics: ['t'],
      fromBeginning: options.fromBeginning ?? false,
      heartbeatIntervalMs: 1_000,
      sessionTimeoutMs: 30_000,
    } as unknown as ResolvedConsumer,
    owner: 'replica-a',
    admin: {} as Admin,
    logger: createLogger({ level: 'silent' }),
    initialEpoch: 0,
    pool: {
      beginEpoch: (epoch, revoked, assigned) => {
        calls.epochs.push({ epoch, revoked, assigned });
        return Promise.resolve({ parts: 0 } as never);
      },
    },
    tableDir: '/nonexistent',
    diskPressure: { full: false, reportFull: () => undefined },
    tracker,
    membership,
    fence,
    gate: undefined,
    offsets: {
      // Kafka answers -1 for a partition the group never committed.
      committed: (tps) =>
        Promise.resolve(tps.map(([t, p]) => committed[`${t}[${p}]`] ?? { offset: -1, metadata: null })),
      bounds: (tps) => Promise.resolve(tps.map(() => ({ low: 5, high: 50 }))),
    },
    topicIds: { claimIo: () => ({}) },
    stopping: () => false,
    fail: (error) => void calls.failed.push(error),
    discovered: () => false,
    groupHadCommits: () => false,
    events,
  };
  const outbox = { resumable: () => [], stoppedAmong: () => [] } as unknown as DeadLetterOutbox;
  const positions = {
    claimed: (topic: string, partition: number, epoch: number, start: number) =>
      void calls.positions.push([topic, partition, epoch, start]),
    next: () => undefined,
  };
  const joins = new JoinClaims(deps, consumer, outbox, positions, committer);
  const join = async (assignment: Record<string, number[]>) => {
    membership.synced('m', broker.generationId);
    joins.onJoin(assignment);
    await joins.untilClaimed(() => Promise.resolve());
  };
  return { joins, join, calls, tracker, events, broker, metrics };
}

test('a join claims each assigned partition at its committed offset under a new staging epoch, then seeks there', async () => {
  const { joins, join, calls, tracker, events } = harness({
    't[0]': { offset: 10, metadata: null },
    't[1]': { offset: 20, metadata: null },
  });
  expect(joins.ready).toBe(false);
  await join({ t: [0, 1] });
  expect(joins.epoch).toBe(1);
  expect(joins.ready).toBe(true);
  // The claim commit carries each partition's chain, this epoch appended at the claimed start.
  expect(calls.sent).toHaveLength(1);
  expect(calls.sent[0]!.map((c) => [c.partition, c.offset, decodeChain(c.metadata)])).toEqual([
    [0, 10, [{ owner: 'replica-a', epoch: 1, start: 10 }]],
    [1, 20, [{ owner: 'replica-a', epoch: 1, start: 20 }]],
  ]);
  expect(tracker.assigned()).toEqual([
    { topic: 't', partition: 0, landed: 10 },
    { topic: 't', partition: 1, landed: 20 },
  ]);
  expect(calls.positions).toEqual([
    ['t', 0, 1, 10],
    ['t', 1, 1, 20],
  ]);
  expect(calls.epochs.map((e) => [e.epoch.epoch, e.revoked, e.assigned])).toEqual([
    [
      1,
      [],
      [
        ['t', 0, 9],
        ['t', 1, 19],
      ],
    ],
  ]);
  expect(calls.seeks).toEqual(['t[0]@10', 't[1]@20']);
  expect(events.counts.joins).toBe(1);
});

test('every join starts from scratch: kept partitions are revoked and claimed again under the next epoch', async () => {
  const { joins, join, calls, tracker } = harness({ 't[0]': { offset: 10, metadata: null } });
  await join({ t: [0] });
  await join({ t: [0] });
  expect(joins.epoch).toBe(2);
  // The second staging epoch begins with the first one's claim revoked at its last landed commit.
  expect(calls.epochs[1]!.revoked).toEqual([['t', 0, 9]]);
  expect(calls.epochs[1]!.epoch).toMatchObject({ owner: 'replica-a', epoch: 2 });
  expect(tracker.assigned()).toEqual([{ topic: 't', partition: 0, landed: 10 }]);
});

test('a partition with no committed offset starts at the log end unless fromBeginning', async () => {
  const latest = harness({});
  await latest.join({ t: [0] });
  expect(latest.tracker.assigned()).toEqual([{ topic: 't', partition: 0, landed: 50 }]);

  const earliest = harness({}, { fromBeginning: true });
  await earliest.join({ t: [0] });
  expect(earliest.tracker.assigned()).toEqual([{ topic: 't', partition: 0, landed: 5 }]);
});

test('a claim the broker refuses is retried while its join is current; nothing is owned until one lands', async () => {
  const { joins, join, calls, tracker, broker } = harness({ 't[0]': { offset: 10, metadata: null } });
  broker.refuseClaims = 1;
  await join({ t: [0] });
  expect(calls.sent).toHaveLength(2);
  expect(tracker.assigned()).toEqual([{ topic: 't', partition: 0, landed: 10 }]);
  expect(joins.ready).toBe(true);
  expect(calls.failed).toEqual([]);
});

test('a join revokes the partitions it no longer has, and their offset series go', async () => {
  const { join, tracker, metrics } = harness({
    't[0]': { offset: 10, metadata: null },
    't[1]': { offset: 20, metadata: null },
  });
  await join({ t: [0, 1] });
  const series = async () => (await metrics.committedOffset.get()).values.map((v) => v.labels.partition);
  expect(await series()).toEqual(['0', '1']);
  await join({ t: [1] });
  expect(tracker.assigned().map((a) => a.partition)).toEqual([1]);
  expect(await series()).toEqual(['1']);
});
