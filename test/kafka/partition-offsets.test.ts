import type { Admin, Kafka } from 'kafkajs';
import { PartitionNotAnsweredError, PartitionOffsets } from '../../src/kafka/partition-offsets';

/**
 * A partition absent from the broker's answer is not a partition without a commit: a
 * broker whose metadata lags a partition added to the topic (metadata reaches brokers
 * asynchronously) answers for the partitions it knows. Reading the absence as "no
 * commit" would start the claim over and overwrite another member's commit and chain.
 */
type Offsets = Record<number, { offset: string; metadata: string | null }>;

function fakeAdmin(known: Offsets, log: string[], name: string): Admin {
  return {
    connect: () => (log.push(`${name}.connect`), Promise.resolve()),
    disconnect: () => (log.push(`${name}.disconnect`), Promise.resolve()),
    fetchOffsets: ({ topics }: { topics: string[] }) =>
      Promise.resolve(
        topics.map((topic) => ({
          topic,
          partitions: Object.entries(known).map(([p, o]) => ({ partition: Number(p), ...o })),
        })),
      ),
    fetchTopicOffsets: () =>
      Promise.resolve(
        Object.keys(known).map((p) => ({ partition: Number(p), offset: '0', low: '3', high: '9' })),
      ),
  } as unknown as Admin;
}

function fakeKafka(fresh: Admin): Kafka {
  return { admin: () => fresh } as unknown as Kafka;
}

describe('partition offsets: an unanswered partition is never "no commit"', () => {
  test('a partition the cached metadata lacks is asked again with fresh metadata', async () => {
    const log: string[] = [];
    const stale = fakeAdmin({ 0: { offset: '12', metadata: 'a' } }, log, 'stale');
    const fresh = fakeAdmin(
      { 0: { offset: '12', metadata: 'a' }, 1: { offset: '40', metadata: 'b' } },
      log,
      'fresh',
    );
    const offsets = new PartitionOffsets(fakeKafka(fresh), stale, 'g');
    await expect(
      offsets.committed([
        ['t', 0],
        ['t', 1],
      ]),
    ).resolves.toEqual([
      { offset: 12, metadata: 'a' },
      { offset: 40, metadata: 'b' },
    ]);
    expect(log).toEqual(['fresh.connect', 'fresh.disconnect']);
  });

  test('still unanswered: an error naming the partition (the claim is retried), never a default', async () => {
    const log: string[] = [];
    const only0 = fakeAdmin({ 0: { offset: '12', metadata: 'a' } }, log, 'a');
    const offsets = new PartitionOffsets(fakeKafka(only0), only0, 'g');
    await expect(offsets.committed([['t', 1]])).rejects.toThrow(PartitionNotAnsweredError);
    await expect(offsets.bounds([['t', 1]])).rejects.toThrow(/t\[1\]/);
  });

  test('answered partitions need no second client', async () => {
    const log: string[] = [];
    const admin = fakeAdmin({ 0: { offset: '-1', metadata: null } }, log, 'a');
    const offsets = new PartitionOffsets(fakeKafka(admin), admin, 'g');
    await expect(offsets.committed([['t', 0]])).resolves.toEqual([{ offset: -1, metadata: null }]);
    await expect(offsets.bounds([['t', 0]])).resolves.toEqual([{ low: 3, high: 9 }]);
    expect(log).toEqual([]);
  });
});
