import { Kafka, type Admin, type Consumer } from 'kafkajs';
import { silentLogger } from '../../src/common/logger';
import type { ResolvedConsumer } from '../../src/config';
import { trackClusters } from '../../src/kafka/protocol/coordinator-hook';
import { TopicSubscription, untilNextRefresh } from '../../src/kafka/topic-subscription';

/**
 * Pattern subscriptions refreshed on every replica: each change restarts a replica's
 * consumer (a rebalance), so replicas refreshing on their own clocks, refreshes queued
 * behind a slow one, or a topic let go on one listing that missed it would each cost the
 * group extra rebalances.
 */
const consumer = {
  topics: undefined,
  topicPatterns: ['^orders\\..+$'],
  topicRefreshMs: 30_000,
  fromBeginning: false,
} as unknown as ResolvedConsumer;

function subscription(listings: (() => Promise<string[]>)[]) {
  const restarts: { subscribed: string[] }[] = [];
  let listed = 0;
  const admin = {
    listTopics: () => {
      const next = listings[Math.min(listed, listings.length - 1)]!;
      listed += 1;
      return next();
    },
  } as unknown as Admin;
  const fakeConsumer = { subscribe: () => Promise.resolve() } as unknown as Consumer;
  // No client is made: the refresh only lets the removed topics go in the (no) clusters it tracks.
  const kafka = trackClusters(new Kafka({ brokers: ['127.0.0.1:1'] }));
  const s = new TopicSubscription({
    consumer,
    kafka,
    admin,
    logger: silentLogger(),
    restart: async (between) => {
      const subscribed: string[] = [];
      await between({
        subscribe: ({ topics }: { topics: string[] }) => (subscribed.push(...topics), Promise.resolve()),
      } as unknown as Consumer);
      restarts.push({ subscribed });
    },
  });
  return { s, restarts, fakeConsumer, listedCount: () => listed };
}

test('every replica refreshes at the same instants: the next wall-clock multiple of topicRefreshMs', () => {
  expect(untilNextRefresh(1_000_000_000_000, 30_000)).toBe(20_000); // 10^12 % 30_000 = 10_000
  expect(untilNextRefresh(1_000_000_010_001, 30_000)).toBe(9_999);
  // Two replicas whose clocks read different times land on the same instant.
  const a = 1_700_000_001_234;
  const b = 1_700_000_008_000;
  expect(a + untilNextRefresh(a, 30_000)).toBe(b + untilNextRefresh(b, 30_000));
});

test('a refresh asked for while one runs is skipped, not queued behind it', async () => {
  let finish: (topics: string[]) => void = () => undefined;
  const slow = new Promise<string[]>((resolve) => (finish = resolve));
  const { s, fakeConsumer, listedCount } = subscription([() => Promise.resolve(['orders.eu']), () => slow]);
  await s.subscribe(fakeConsumer);
  const first = s.refresh();
  const second = s.refresh();
  expect(second).toBe(first);
  finish(['orders.eu']);
  await first;
  expect(listedCount()).toBe(2); // the subscribe's listing and one refresh
});

test('a matched topic is let go only after two listings in a row without it', async () => {
  const { s, restarts, fakeConsumer } = subscription([
    () => Promise.resolve(['orders.eu', 'orders.us']),
    () => Promise.resolve(['orders.eu']), // orders.us missing once
    () => Promise.resolve(['orders.eu', 'orders.us']), // back: it was a listing that missed it
    () => Promise.resolve(['orders.eu']),
    () => Promise.resolve(['orders.eu']),
  ]);
  await s.subscribe(fakeConsumer);
  await s.refresh();
  await s.refresh();
  await s.refresh();
  expect(restarts).toEqual([]);
  await s.refresh();
  expect(restarts).toEqual([{ subscribed: [] }]);
});
