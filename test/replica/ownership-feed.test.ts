import type { Admin } from 'kafkajs';
import type { ResolvedConsumer } from '../../src/config';
import { ownershipReader } from '../../src/replica/ownership-feed';

/**
 * A topic a pattern matched is deleted: Kafka drops the group's committed offsets with
 * it, and the topic leaves the group's topic list. Its sealed parts committed before the
 * deletion must stay publishable: the planner needs the partitions' last known chain and
 * commit, which the feed keeps (marked final), and only those.
 */
const consumer = {
  groupId: 'g',
  topics: undefined,
  topicPatterns: ['^orders\\..+$'],
} as unknown as ResolvedConsumer;

function broker() {
  const state = {
    topics: ['orders.eu', 'orders.us'],
    offsets: new Map<string, number>([
      ['orders.eu', 10],
      ['orders.us', 20],
    ]),
  };
  const admin = {
    listTopics: () => Promise.resolve([...state.topics]),
    fetchOffsets: ({ topics }: { topics: string[] }) =>
      Promise.resolve(
        topics.map((topic) => ({
          topic,
          partitions: [{ partition: 0, offset: String(state.offsets.get(topic) ?? -1), metadata: null }],
        })),
      ),
  } as unknown as Admin;
  return { state, admin };
}

test("a deleted pattern topic's last known ownership stays in the snapshot, marked final", async () => {
  const { state, admin } = broker();
  const read = ownershipReader(admin, consumer);
  expect((await read()).map(([t, p, o]) => [t, p, o.committed, o.final])).toEqual([
    ['orders.eu', 0, 10, undefined],
    ['orders.us', 0, 20, undefined],
  ]);
  state.offsets.set('orders.us', 25); // the last commit before the deletion that the feed sees
  await read();
  state.topics = ['orders.eu'];
  state.offsets.delete('orders.us');
  state.offsets.set('orders.eu', 12);
  const after = await read();
  expect(after.map(([t, p, o]) => [t, p, o.committed, o.final])).toEqual([
    ['orders.eu', 0, 12, undefined],
    ['orders.us', 0, 25, true],
  ]);
  // Kept through later snapshots, unchanged.
  expect((await read()).find(([t]) => t === 'orders.us')?.[2]).toMatchObject({ committed: 25, final: true });
});

test('a topic recreated under the same name is read anew (its old rows are dropped)', async () => {
  const { state, admin } = broker();
  const read = ownershipReader(admin, consumer);
  await read();
  state.topics = ['orders.eu'];
  state.offsets.delete('orders.us');
  await read();
  state.topics = ['orders.eu', 'orders.us'];
  const recreated = await read();
  expect(recreated.map(([t, , o]) => [t, o.committed])).toEqual([['orders.eu', 10]]);
});
