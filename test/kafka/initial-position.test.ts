import type { Admin, Kafka } from 'kafkajs';
import { startsFromEarliest } from '../../src/kafka/initial-position';
import { PartitionOffsets } from '../../src/kafka/partition-offsets';

/**
 * Where a partition without a committed offset starts. With `fromBeginning: false`, a
 * pattern-matched topic must not start from its log end once the group has committed
 * offsets: the topic appeared after the group began, so every record of it is new, and
 * whether this replica saw it appear (it may have restarted before its first claim
 * landed, or another replica leads the rebalance) must not decide.
 */
const consumer = { fromBeginning: false, topics: ['audit'] };
const nothingDiscovered = () => false;

describe('a pattern-matched topic without commits, fromBeginning false', () => {
  test('is read from its earliest offset by a replica that never saw it appear, once the group has commits', () => {
    expect(
      startsFromEarliest({ consumer, groupHadCommits: true, discovered: nothingDiscovered }, 'orders.eu'),
    ).toBe(true);
  });

  test('is read from its earliest offset when this replica discovered it while running', () => {
    expect(
      startsFromEarliest(
        { consumer, groupHadCommits: false, discovered: (t) => t === 'orders.eu' },
        'orders.eu',
      ),
    ).toBe(true);
  });

  test("starts from the log end at the group's first start (fromBeginning rules the first start)", () => {
    expect(
      startsFromEarliest({ consumer, groupHadCommits: false, discovered: nothingDiscovered }, 'orders.eu'),
    ).toBe(false);
  });

  test('a named topic keeps fromBeginning whatever the group has committed', () => {
    expect(startsFromEarliest({ consumer, groupHadCommits: true, discovered: () => true }, 'audit')).toBe(
      false,
    );
    expect(
      startsFromEarliest(
        {
          consumer: { ...consumer, fromBeginning: true },
          groupHadCommits: false,
          discovered: nothingDiscovered,
        },
        'orders.eu',
      ),
    ).toBe(true);
  });
});

describe('whether a group has started before', () => {
  const offsetsOf = (answer: { topic: string; partitions: { partition: number; offset: string }[] }[]) => {
    const asked: unknown[] = [];
    const admin = {
      fetchOffsets: (request: unknown) => {
        asked.push(request);
        return Promise.resolve(
          answer.map((t) => ({ ...t, partitions: t.partitions.map((p) => ({ ...p, metadata: null })) })),
        );
      },
    } as unknown as Admin;
    return { offsets: new PartitionOffsets({} as Kafka, admin, 'g'), asked };
  };

  test('a committed offset on any topic means it has (every topic of the group is asked)', async () => {
    const { offsets, asked } = offsetsOf([
      { topic: 'gone', partitions: [{ partition: 0, offset: '-1' }] },
      { topic: 'audit', partitions: [{ partition: 3, offset: '17' }] },
    ]);
    await expect(offsets.groupHasCommits()).resolves.toBe(true);
    expect(asked).toEqual([{ groupId: 'g' }]);
  });

  test("a broker that has just started (coordinator not there yet) is asked again, never read as the group's first start", async () => {
    const answers: (() => Promise<unknown>)[] = [
      () =>
        Promise.reject(
          Object.assign(new Error('The group coordinator is not available'), { retriable: true }),
        ),
      // kafkajs's own retries spent: the same error wrapped, marked not retriable.
      () =>
        Promise.reject(
          Object.assign(new Error('This is not the correct coordinator for this group'), {
            retriable: false,
            cause: Object.assign(new Error('This is not the correct coordinator for this group'), {
              retriable: true,
            }),
          }),
        ),
      () =>
        Promise.resolve([{ topic: 'audit', partitions: [{ partition: 0, offset: '4', metadata: null }] }]),
    ];
    const admin = { fetchOffsets: () => answers.shift()!() } as unknown as Admin;
    await expect(new PartitionOffsets({} as Kafka, admin, 'g').groupHasCommits()).resolves.toBe(true);
    expect(answers).toHaveLength(0);
  });

  test('an error no retry cures stops the start instead of guessing', async () => {
    const admin = {
      fetchOffsets: () =>
        Promise.reject(Object.assign(new Error('Not authorized to access group'), { retriable: false })),
    } as unknown as Admin;
    await expect(new PartitionOffsets({} as Kafka, admin, 'g').groupHasCommits()).rejects.toThrow(
      'Not authorized',
    );
  });

  test('no committed offset means its first start', async () => {
    const { offsets } = offsetsOf([{ topic: 'gone', partitions: [{ partition: 0, offset: '-1' }] }]);
    await expect(offsets.groupHasCommits()).resolves.toBe(false);
  });
});
