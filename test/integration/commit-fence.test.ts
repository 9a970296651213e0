import type { Consumer } from 'kafkajs';
import { createHookedConsumer } from '../../src/kafka/protocol/coordinator-hook';
import { CommitFence, type FencedCommitOutcome } from '../../src/ownership/commit-fence';
import { GroupMembership } from '../../src/ownership/membership';
import { brokerSuite, untilHosted } from '../support/broker-suite';
import { uniqueName } from '../support/kafka';

/**
 * Kafkajs retries a failed commit inside consumer.commitOffsets, and a retry after a
 * rejoin goes out in the new generation. Here the first attempts of
 * a commit fail with a retriable error (as a lost connection would) until a second
 * member's arrival has made the first rejoin; then the retry is let through to the
 * real broker. Without the fence it lands, for a partition the member may no longer
 * own; with the fence it is refused before it is sent.
 */
describe('commit fence against a real broker', () => {
  const suite = brokerSuite('commit-fence');
  const consumers: Consumer[] = [];
  afterAll(async () => {
    await Promise.all(consumers.map((c) => c.disconnect().catch(() => undefined)));
  });

  async function straddlingCommit(
    fenced: boolean,
  ): Promise<{ outcome: FencedCommitOutcome; committed: string }> {
    const topic = uniqueName('fence');
    const groupId = uniqueName('fence-group');
    await suite.admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true });
    await untilHosted(suite.admin, topic, 2);
    const membership = new GroupMembership();
    const fence = new CommitFence(membership, groupId);
    let firstJoin = 0;
    const consumer = createHookedConsumer(
      suite.kafka,
      {
        groupId,
        sessionTimeout: 6_000,
        heartbeatInterval: 500,
        retry: { retries: 40, initialRetryTime: 300, maxRetryTime: 600 },
      },
      {
        synced: (memberId, generationId) => membership.synced(memberId, generationId),
        beforeCommit: (attempt) => {
          if (membership.current?.sequence === firstJoin) {
            throw Object.assign(new Error('injected: connection lost'), { retriable: true });
          }
          if (fenced) fence.check(attempt);
        },
        committed: (attempt) => fence.answered(attempt),
      },
    );
    consumers.push(consumer);
    const joined = new Promise<void>((resolve) =>
      consumer.on(consumer.events.GROUP_JOIN, () => {
        membership.joined();
        resolve();
      }),
    );
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({ autoCommit: false, eachBatch: () => Promise.resolve() });
    await joined;
    firstJoin = membership.current!.sequence;
    const decidedIn = membership.current!;
    const outcome = fence.commit(decidedIn, () =>
      consumer.commitOffsets([{ topic, partition: 0, offset: '5', metadata: 'late' }]),
    );
    // A second member joins: the first rejoins while its commit is being retried.
    const other = suite.kafka.consumer({ groupId, sessionTimeout: 6_000, heartbeatInterval: 500 });
    consumers.push(other);
    await other.connect();
    await other.subscribe({ topics: [topic], fromBeginning: true });
    await other.run({ autoCommit: false, eachBatch: () => Promise.resolve() });
    const result = await outcome;
    const offsets = await suite.admin.fetchOffsets({ groupId, topics: [topic] });
    const committed = offsets[0]!.partitions.find((p) => p.partition === 0)!.offset;
    await Promise.all([consumer.disconnect(), other.disconnect()]);
    return { outcome: result, committed };
  }

  test('without the fence, the retried commit lands in the next generation (the hazard)', async () => {
    const { outcome, committed } = await straddlingCommit(false);
    expect(outcome.kind).toBe('landed');
    expect(committed).toBe('5');
  });

  test('with the fence, the retry is refused before it is sent and nothing is committed', async () => {
    const { outcome, committed } = await straddlingCommit(true);
    expect(outcome.kind).toBe('refused');
    expect(committed).toBe('-1');
    // kafkajs wraps the fence's error (not retriable) in its own; the message is ours.
    expect(outcome.kind === 'refused' && (outcome.error as Error).message).toMatch(/refused before sending/);
  });
});
