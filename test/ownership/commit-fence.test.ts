import {
  ChainlessCommitRefusedError,
  CommitFence,
  CommitFencedError,
} from '../../src/ownership/commit-fence';
import { GroupMembership } from '../../src/ownership/membership';

/** A kafkajs-like commit: each attempt goes through the fence, as the coordinator hook makes it. */
function attempt(fence: CommitFence, membership: GroupMembership, answered = true): Promise<void> {
  // kafkajs reads member and generation from its current offset manager at each attempt.
  const synced = membership.current!;
  const request = { groupId: 'g', memberId: synced.memberId, groupGenerationId: synced.generationId };
  fence.check(request);
  if (answered) fence.answered(request);
  return Promise.resolve();
}

describe('commit fence', () => {
  test('a commit decided in one generation lands while that generation is current', async () => {
    const m = new GroupMembership();
    m.synced('m1', 5);
    const g = m.joined();
    const fence = new CommitFence(m, 'g');
    await expect(fence.commit(g, () => attempt(fence, m))).resolves.toEqual({ kind: 'landed' });
  });

  test('a retry that would go out after a rejoin is refused before it is sent', async () => {
    const m = new GroupMembership();
    m.synced('m1', 5);
    const g = m.joined();
    const fence = new CommitFence(m, 'g');
    const sent: number[] = [];
    const outcome = await fence.commit(g, () => {
      // First attempt: a retriable failure (connection lost). kafkajs waits, and meanwhile the group rebalances.
      m.synced('m1', 6);
      m.joined();
      // The retry goes out with the new generation (kafkajs rebuilt its offset manager).
      const request = { groupId: 'g', memberId: 'm1', groupGenerationId: 6 };
      fence.check(request);
      sent.push(request.groupGenerationId);
      return Promise.resolve();
    });
    expect(sent).toEqual([]);
    expect(outcome.kind).toBe('refused');
    expect(outcome.kind === 'refused' && outcome.error).toBeInstanceOf(CommitFencedError);
  });

  test('between SyncGroup and GROUP_JOIN an attempt in the new generation is refused', async () => {
    const m = new GroupMembership();
    m.synced('m1', 5);
    const g = m.joined();
    const fence = new CommitFence(m, 'g');
    void fence.commit(g, () => new Promise(() => undefined));
    await new Promise((r) => setImmediate(r)); // the commit is in flight
    // kafkajs swapped its offset manager (generation 6); our GROUP_JOIN handler has not run yet.
    m.synced('m1', 6);
    expect(() => fence.check({ groupId: 'g', memberId: 'm1', groupGenerationId: 6 })).toThrow(
      CommitFencedError,
    );
  });

  test('kafkajs returning without sending is not a landed commit', async () => {
    const m = new GroupMembership();
    m.synced('m1', 5);
    const g = m.joined();
    const fence = new CommitFence(m, 'g');
    // runner.commitOffsets returns undefined while the runner is not running: no attempt at all.
    await expect(fence.commit(g, () => Promise.resolve())).resolves.toEqual({ kind: 'not-sent' });
  });

  test('a commit decided before a join that it waited behind is never sent', async () => {
    const m = new GroupMembership();
    m.synced('m1', 5);
    const g = m.joined();
    const fence = new CommitFence(m, 'g');
    let release!: () => void;
    const first = fence.commit(g, () => new Promise<void>((r) => (release = r)));
    let sent = false;
    const second = fence.commit(g, () => {
      sent = true;
      return Promise.resolve();
    });
    await new Promise((r) => setImmediate(r)); // the first commit is in flight
    m.synced('m1', 6);
    m.joined();
    release();
    await first;
    expect((await second).kind).toBe('refused');
    expect(sent).toBe(false);
  });

  test("kafkajs's own commit of a default offset (no chain) never lands, even in the current generation", () => {
    const m = new GroupMembership();
    m.synced('m1', 5);
    m.joined();
    const fence = new CommitFence(m, 'g');
    // OffsetManager.setDefaultOffset after OFFSET_OUT_OF_RANGE: offset -2, metadata absent.
    const reset = {
      groupId: 'g',
      memberId: 'm1',
      groupGenerationId: 5,
      topics: [{ partitions: [{ metadata: null }] }],
    };
    expect(() => fence.check(reset)).toThrow(ChainlessCommitRefusedError);
  });

  test('another group is not fenced', () => {
    const m = new GroupMembership();
    const fence = new CommitFence(m, 'g');
    expect(() => fence.check({ groupId: 'other', memberId: 'x', groupGenerationId: 1 })).not.toThrow();
  });
});

describe('commit fence: whose answer counts', () => {
  test('an answered kafkajs commit (no metadata) does not make our unsent commit landed', async () => {
    const m = new GroupMembership();
    m.synced('m1', 5);
    const g = m.joined();
    const fence = new CommitFence(m, 'g');
    const outcome = await fence.commit(g, () => {
      // kafkajs's setDefaultOffset answered meanwhile; our own commit was never sent.
      fence.answered({
        groupId: 'g',
        memberId: 'm1',
        groupGenerationId: 5,
        topics: [{ partitions: [{ metadata: null }] }],
      });
      return Promise.resolve();
    });
    expect(outcome).toEqual({ kind: 'not-sent' });
  });
});
