import type { Kafka } from 'kafkajs';
import { CoordinatorHookError, wrapClusterFactory } from './coordinator-hook';

/**
 * How long an admin client of this process reuses the topic metadata it read (the topics'
 * partitions and their leaders), which kafkajs's admin looks up before each offset read.
 *
 * kafkajs 2.2.4 makes its producers' and consumers' clusters with a `metadataMaxAge` of 5
 * minutes but its admins' without one, so an admin's metadata is stale at once: every
 * `fetchTopicOffsets`, and every topic of a `fetchOffsets`, asked the broker again for the
 * metadata of every topic that admin had ever looked up. A replica routing a pattern of 200
 * topics made 957 metadata requests in a 12 s backlog (each claim's log bounds, each
 * ownership read, each lag gauge), ~100 MB of kafkajs objects that outlived V8's young
 * generation, and ~14 a second once idle (bench/many-tables-levers.md).
 *
 * What the reuse can hide is bounded: a topic looked up for the first time is read at once
 * (kafkajs refreshes when an admin's topics grow); a leader that moved fails an offset read,
 * after which the next one reads the metadata again (`expireOnFailure`); a partition added
 * to a topic is seen within 30 s, and the readers that must not miss one ask without it
 * (a claim's offsets ask a fresh admin for a partition an answer lacks, partition-offsets.ts;
 * the ownership reads name no topics, ownership-feed.ts). The consumer's own metadata
 * takes up to 5 minutes to see a new partition.
 */
export const ADMIN_METADATA_MAX_AGE_MS = 30_000;

/** The slice of kafkajs 2.2.4's Cluster this module touches. */
interface AdminCluster {
  fetchTopicsOffset: (topics: unknown) => Promise<unknown>;
  addTargetTopic: (topic: string) => Promise<unknown>;
  addMultipleTargetTopics: (topics: string[]) => Promise<unknown>;
  brokerPool?: { metadataExpireAt?: number | null };
}
const INSTALLED = Symbol('kafka-lance:admin-metadata');

/**
 * Makes every admin client `kafka` creates from now on keep its topic metadata for
 * `maxAgeMs`. Producers and consumers, which set their own age, are unchanged. Idempotent.
 */
export function keepAdminMetadata(kafka: Kafka, maxAgeMs = ADMIN_METADATA_MAX_AGE_MS): Kafka {
  const target = kafka as unknown as Record<symbol, unknown>;
  if (target[INSTALLED] !== undefined) return kafka;
  wrapClusterFactory<AdminCluster>(
    kafka,
    (own) => (options) =>
      // kafkajs's admin() is the one client that passes no age (its producer and consumer
      // pass their default, 5 minutes).
      options.metadataMaxAge !== undefined
        ? own(options)
        : addTopicsTogether(expireOnFailure(own({ ...options, metadataMaxAge: maxAgeMs }))),
  );
  target[INSTALLED] = true;
  return kafka;
}

/**
 * An offset read that failed (a leader that moved, a topic recreated with fewer partitions)
 * marks the metadata stale: the next read asks the broker first, as every read did before.
 */
function expireOnFailure(cluster: AdminCluster): AdminCluster {
  const pool = cluster.brokerPool;
  if (typeof cluster.fetchTopicsOffset !== 'function' || pool === undefined || !('metadataExpireAt' in pool))
    throw new CoordinatorHookError('no cluster.fetchTopicsOffset or brokerPool.metadataExpireAt');
  const fetchTopicsOffset = cluster.fetchTopicsOffset.bind(cluster);
  cluster.fetchTopicsOffset = async (topics: unknown) => {
    try {
      return await fetchTopicsOffset(topics);
    } catch (error) {
      pool.metadataExpireAt = null;
      throw error;
    }
  };
  return cluster;
}

/**
 * Topics an admin looks up together are added to its metadata together. kafkajs adds each
 * topic of a `fetchOffsets` on its own, and each addition reads the metadata of every topic
 * so far: a claim of 200 new topics made 200 requests naming 1 to 200 topics (~20,000 topics
 * named). Additions asked in the same turn of the event loop are made as one, with one
 * metadata request. A topic that fails the addition (unknown, not authorized) fails every
 * caller of that turn; kafkajs's callers that add several topics at once (`fetchOffsets`)
 * failed whole anyway.
 */
function addTopicsTogether(cluster: AdminCluster): AdminCluster {
  if (typeof cluster.addTargetTopic !== 'function' || typeof cluster.addMultipleTargetTopics !== 'function')
    throw new CoordinatorHookError('no cluster.addTargetTopic or cluster.addMultipleTargetTopics');
  const addMultiple = cluster.addMultipleTargetTopics.bind(cluster);
  let gathering: { topics: Set<string>; added: Promise<unknown> } | undefined;
  cluster.addTargetTopic = (topic: string) => {
    if (gathering === undefined) {
      const topics = new Set<string>();
      const added = Promise.resolve().then(() => {
        gathering = undefined;
        return addMultiple([...topics]);
      });
      gathering = { topics, added };
    }
    gathering.topics.add(topic);
    return gathering.added;
  };
  return cluster;
}
