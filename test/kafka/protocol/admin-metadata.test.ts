import { Kafka } from 'kafkajs';
import { ADMIN_METADATA_MAX_AGE_MS, keepAdminMetadata } from '../../../src/kafka/protocol/admin-metadata';
import { forgetTopics, trackClusters } from '../../../src/kafka/protocol/coordinator-hook';

/** The parts of kafkajs 2.2.4's Cluster these tests look at. */
interface MadeCluster {
  brokerPool: { metadataMaxAge: number; metadataExpireAt: number | null };
  fetchTopicsOffset: (topics: unknown) => Promise<unknown>;
}

/** A cluster as kafkajs's admin(), producer() and consumer() make theirs, without connecting. */
const makeCluster = (kafka: Kafka, options: Record<string, unknown>): MadeCluster => {
  const key = Object.getOwnPropertySymbols(kafka).find(
    (s) => s.description === 'private:Kafka:createCluster',
  )!;
  return (kafka as unknown as Record<symbol, (o: unknown) => MadeCluster>)[key]!(options);
};

test("an admin's cluster keeps its topic metadata for a while; producers' and consumers' keep their own age", () => {
  const kafka = new Kafka({ brokers: ['127.0.0.1:1'] });
  // kafkajs's own admin cluster: no age, so its metadata is stale at once.
  expect(makeCluster(kafka, { allowAutoTopicCreation: false }).brokerPool.metadataMaxAge).toBe(0);
  keepAdminMetadata(kafka);
  expect(makeCluster(kafka, { allowAutoTopicCreation: false }).brokerPool.metadataMaxAge).toBe(
    ADMIN_METADATA_MAX_AGE_MS,
  );
  expect(makeCluster(kafka, { metadataMaxAge: 300_000 }).brokerPool.metadataMaxAge).toBe(300_000);
});

test('a failed offset read makes the next lookup read the metadata again (a leader that moved is found)', async () => {
  const kafka = keepAdminMetadata(new Kafka({ brokers: ['127.0.0.1:1'] }));
  const cluster = makeCluster(kafka, { allowAutoTopicCreation: false });
  cluster.brokerPool.metadataExpireAt = Date.now() + 60_000;
  // No metadata for the topic: kafkajs fails to find its leaders, as a stale leader's answer fails.
  await expect(
    cluster.fetchTopicsOffset([{ topic: 'any', partitions: [{ partition: 0 }], fromBeginning: true }]),
  ).rejects.toThrow();
  expect(cluster.brokerPool.metadataExpireAt).toBeNull();
});

test('a topic let go of (deleted under a pattern) leaves the kept metadata at the next lookup', () => {
  const kafka = keepAdminMetadata(trackClusters(new Kafka({ brokers: ['127.0.0.1:1'] })));
  const cluster = makeCluster(kafka, { allowAutoTopicCreation: false });
  cluster.brokerPool.metadataExpireAt = Date.now() + 60_000;
  forgetTopics(kafka, ['gone']);
  expect(cluster.brokerPool.metadataExpireAt).toBeNull();
});
