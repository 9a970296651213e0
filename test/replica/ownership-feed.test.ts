import type { Admin } from 'kafkajs';
import type { ResolvedConsumer } from '../../src/config';
import { silentLogger } from '../../src/common/logger';
import type { OwnershipRow } from '../../src/ownership/partition-ownership';
import { OwnershipFeed, TOPIC_LIST_REUSED_FOR_MS, ownershipReader } from '../../src/replica/ownership-feed';

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
  topicRefreshMs: 30_000,
} as unknown as ResolvedConsumer;

function broker() {
  const state = {
    topics: ['orders.eu', 'orders.us'],
    offsets: new Map<string, number>([
      ['orders.eu', 10],
      ['orders.us', 20],
    ]),
    listings: 0,
    /** Topics whose offset read fails (a deleted topic the admin's metadata still names). */
    unreadable: new Set<string>(),
    /** Partitions committed beyond partition 0 (added to the topic after the admin's metadata was read). */
    added: new Map<string, number>(),
    /** Offset reads that named topics (kafkajs then looks each one up in its metadata). */
    namedReads: 0,
  };
  const partitionsOf = (topic: string, named: boolean) => [
    { partition: 0, offset: String(state.offsets.get(topic) ?? -1), metadata: null },
    // kafkajs asks only for the partitions its metadata lists when topics are named.
    ...(!named && state.added.has(topic)
      ? [{ partition: 1, offset: String(state.added.get(topic)), metadata: null }]
      : []),
  ];
  const admin = {
    listTopics: () => {
      state.listings += 1;
      return Promise.resolve([...state.topics]);
    },
    // As kafkajs answers: named topics, every partition its metadata lists; none named, every
    // topic the group has committed (a deleted topic's commits are gone with it).
    fetchOffsets: ({ topics }: { topics?: string[] }) => {
      if (topics === undefined)
        return Promise.resolve(
          [...state.offsets.keys()].map((topic) => ({ topic, partitions: partitionsOf(topic, false) })),
        );
      state.namedReads += 1;
      return topics.some((t) => state.unreadable.has(t))
        ? Promise.reject(new Error('This server does not host this topic-partition'))
        : Promise.resolve(topics.map((topic) => ({ topic, partitions: partitionsOf(topic, true) })));
    },
  } as unknown as Admin;
  return { state, admin };
}

/** A clock that moves only when told (the topic list is reused while it stands still). */
function stoppedClock() {
  let now = 1_000_000;
  return { clock: () => now, pass: (ms: number) => (now += ms) };
}

test("a deleted pattern topic's last known ownership stays in the snapshot, marked final, though the topic list was read before the deletion", async () => {
  const { state, admin } = broker();
  // The clock stands still: the list read first is reused, and the lost offsets make it read again.
  const read = ownershipReader(admin, consumer, stoppedClock().clock);
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

test("a partition added to a topic is read once committed, whatever the admin's metadata of the topic lists", async () => {
  const { state, admin } = broker();
  const read = ownershipReader(admin, consumer, stoppedClock().clock);
  await read();
  state.added.set('orders.eu', 7);
  expect((await read()).map(([t, p, o]) => [t, p, o.committed])).toEqual([
    ['orders.eu', 0, 10],
    ['orders.eu', 1, 7],
    ['orders.us', 0, 20],
  ]);
  // And the reads never named topics: each named one costs a metadata request of every topic.
  expect(state.namedReads).toBe(0);
});

test('a topic deleted between a fresh topic list and the offset read still leaves its rows, marked final', async () => {
  const { state, admin } = broker();
  const time = stoppedClock();
  const read = ownershipReader(admin, consumer, time.clock);
  await read();
  // The list is due: it still names orders.us, whose deletion lands before the offsets are read.
  time.pass(TOPIC_LIST_REUSED_FOR_MS);
  const listTopics = admin.listTopics.bind(admin);
  admin.listTopics = async () => {
    const listed = await listTopics();
    admin.listTopics = listTopics;
    state.topics = ['orders.eu'];
    state.offsets.delete('orders.us');
    return listed;
  };
  expect((await read()).map(([t, p, o]) => [t, p, o.committed, o.final])).toEqual([
    ['orders.eu', 0, 10, undefined],
    ['orders.us', 0, 20, true],
  ]);
});

test('a topic recreated under the same name is read anew (its old rows are dropped)', async () => {
  const { state, admin } = broker();
  const time = stoppedClock();
  const read = ownershipReader(admin, consumer, time.clock);
  await read();
  state.topics = ['orders.eu'];
  state.offsets.delete('orders.us');
  await read();
  state.topics = ['orders.eu', 'orders.us'];
  // Seen back once the list is read again.
  time.pass(TOPIC_LIST_REUSED_FOR_MS);
  const recreated = await read();
  expect(recreated.map(([t, , o]) => [t, o.committed])).toEqual([['orders.eu', 10]]);
});

test('the topic list is reused between reads, and read again when it is due or a read fails', async () => {
  const { state, admin } = broker();
  const time = stoppedClock();
  const read = ownershipReader(admin, consumer, time.clock);
  await read();
  state.offsets.set('orders.eu', 11);
  expect((await read()).find(([t]) => t === 'orders.eu')?.[2]).toMatchObject({ committed: 11 });
  expect(state.listings).toBe(1);
  // A topic created meanwhile is read once the list is due again.
  state.topics = ['orders.eu', 'orders.jp', 'orders.us'];
  state.offsets.set('orders.jp', 3);
  expect((await read()).map(([t]) => t)).toEqual(['orders.eu', 'orders.us']);
  time.pass(TOPIC_LIST_REUSED_FOR_MS);
  expect((await read()).map(([t]) => t)).toEqual(['orders.eu', 'orders.jp', 'orders.us']);
  expect(state.listings).toBe(2);
  // A listed topic whose read fails (deleted, its metadata still known): listed again at once.
  state.topics = ['orders.eu', 'orders.us'];
  state.offsets.delete('orders.jp');
  state.unreadable.add('orders.jp');
  const after = await read();
  expect(state.listings).toBe(3);
  expect(after.map(([t, , o]) => [t, o.committed, o.final])).toEqual([
    ['orders.eu', 11, undefined],
    ['orders.us', 20, undefined],
    ['orders.jp', 3, true],
  ]);
});

test("a drain reads the topic list afresh: a topic first committed just before the stop is in the drain's snapshot", async () => {
  const { state, admin } = broker();
  const applied: (readonly OwnershipRow[])[] = [];
  const feed = new OwnershipFeed(
    admin,
    { ...consumer, materializer: { pollMs: 60_000 } } as unknown as ResolvedConsumer,
    (rows) => applied.push(rows),
    silentLogger(),
  );
  while (applied.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  // Created, consumed and committed within the list's reuse time, then SIGTERM.
  state.topics = ['orders.eu', 'orders.jp', 'orders.us'];
  state.offsets.set('orders.jp', 3);
  await feed.stop(Date.now() + 5_000);
  expect(applied.at(-1)!.map(([t]) => t)).toEqual(['orders.eu', 'orders.jp', 'orders.us']);
});
