import type { Consumer, ConsumerConfig, Kafka } from 'kafkajs';
import {
  CorruptCompressedBatchError,
  fetchExpansion,
  misframedBatches,
  type FetchExpansion,
  type MisframedBatch,
} from './compression';
import { offsetOutOfRangeIn } from './kafka-errors';
import { fetchedBatch, hideAbortedRecords, type FetchedBatch } from './fetched-batch';
import { FetchOrder } from './fetch-order';
import type { FetchRequest, FetchResponse } from './fetch-request';
import { unshuffledFetch } from './unshuffled-fetch';

/**
 * What kafka-lance needs to see of the group coordinator's traffic, which kafkajs
 * does not expose: the generation a SyncGroup answered (GROUP_JOIN carries no
 * generation id), and each OffsetCommit attempt (its retries happen inside kafkajs).
 */
export interface CoordinatorHook {
  synced(memberId: string, generationId: number): void;
  /** Throws to refuse the attempt before it is sent. */
  beforeCommit(attempt: CommitRequest): void;
  committed(attempt: CommitRequest): void;
}

/**
 * What kafka-lance needs to see of the consumer's fetches, which kafkajs handles out of
 * sight: batches with nothing deliverable (it moves past them without calling eachBatch)
 * and OFFSET_OUT_OF_RANGE (it resets the position and commits a default offset without
 * metadata, erasing the ownership chain).
 */
export interface FetchHook {
  /** Every partition a fetch answered, as the kafkajs Batch its consumer group builds from it. */
  fetched(batches: readonly FetchedBatch[]): void;
  /**
   * The broker refused a fetch offset as out of range. The fetch is answered empty
   * instead of failing (kafkajs would reset and commit); the hook must move the
   * partition's position (a seek) before it resolves.
   */
  offsetOutOfRange(topic: string, partition: number, fetchOffset: number): Promise<void>;
  /**
   * A compressed record batch of this partition, fetched from `fetchOffset`, cannot be
   * read. kafkajs fails the whole fetch for it (and would fail it again forever): the
   * fetch is answered empty and the hook must take the partition out of the fetch.
   */
  corruptBatch(
    topic: string,
    partition: number,
    fetchOffset: number,
    error: CorruptCompressedBatchError,
  ): void;
  /**
   * A compressed record batch of this partition whose records' lengths are not their sizes
   * (a producer's bug) was read by its fields, as the broker validated it (record-framing.ts).
   */
  misframedBatch(topic: string, partition: number, batch: MisframedBatch): void;
}

export type { FetchRequest, FetchResponse } from './fetch-request';

/** An OffsetCommit request as kafkajs 2.2.4's Broker takes it. */
export interface CommitRequest {
  readonly groupId: string;
  readonly memberId: string;
  readonly groupGenerationId: number;
  readonly topics?: readonly { readonly partitions: readonly { readonly metadata?: string | null }[] }[];
}

/** The slice of kafkajs 2.2.4's internal Broker that the hook wraps. */
interface InternalBroker {
  syncGroup: (request: { groupId: string; generationId: number; memberId: string }) => Promise<unknown>;
  offsetCommit: (request: CommitRequest) => Promise<unknown>;
  fetch: (request: FetchRequest) => Promise<FetchResponse>;
}
interface InternalCluster {
  findGroupCoordinator: (request: unknown) => Promise<InternalBroker>;
  findBroker: (request: unknown) => Promise<InternalBroker>;
  /** The topics whose metadata kafkajs refreshes: it only ever adds to them. */
  targetTopics?: Set<string>;
  /** Null: the next lookup reads the metadata again. */
  brokerPool?: { metadataExpireAt?: number | null };
}

/** The clusters a tracked Kafka instance made (trackClusters), to let go of deleted topics in each. */
const CLUSTERS = Symbol('kafka-lance:clusters');

/** How kafkajs 2.2.4's Kafka instance makes the cluster of each client (a private factory). */
export type ClusterFactory<C> = (
  options: { readonly metadataMaxAge?: number } & Record<string, unknown>,
) => C;

const CREATE_CLUSTER = 'private:Kafka:createCluster';
const HOOKED = Symbol('kafka-lance:coordinator-hooked');

/** kafkajs's internals moved (it is pinned at 2.2.4 for this reason). */
export class CoordinatorHookError extends Error {
  constructor(what: string) {
    super(`kafkajs internals are not as expected (${what}); kafka-lance needs kafkajs 2.2.4 exactly`);
    this.name = 'CoordinatorHookError';
  }
}

/**
 * Creates a kafkajs consumer whose group-coordinator connections report to `hook`.
 *
 * kafkajs builds one cluster per consumer through a private factory on the Kafka
 * instance; for the duration of this call the factory is wrapped so that every
 * broker the consumer's cluster hands out as a coordinator reports SyncGroup
 * answers and OffsetCommit attempts. Nothing else is changed, and other clients
 * made from the same Kafka instance are not affected.
 */
export function createHookedConsumer(
  kafka: Kafka,
  config: ConsumerConfig,
  hook: CoordinatorHook & Partial<FetchHook>,
): Consumer {
  const original = wrapClusterFactory<InternalCluster>(
    kafka,
    (own) => (options) => hookCluster(own(options), hook),
  );
  try {
    return kafka.consumer(config);
  } finally {
    wrapClusterFactory(kafka, () => original);
  }
}

/**
 * Replaces the factory every client `kafka` makes from now on builds its cluster with by
 * `wrap(the factory in place)`, and returns the one it replaced (to put it back).
 */
export function wrapClusterFactory<C>(
  kafka: Kafka,
  wrap: (own: ClusterFactory<C>) => ClusterFactory<C>,
): ClusterFactory<C> {
  const target = kafka as unknown as Record<symbol, ClusterFactory<C> | undefined>;
  const key = Object.getOwnPropertySymbols(kafka).find((s) => s.description === CREATE_CLUSTER);
  const own = key ? target[key] : undefined;
  if (!key || typeof own !== 'function') throw new CoordinatorHookError(`no ${CREATE_CLUSTER}`);
  target[key] = wrap(own);
  return own;
}

/**
 * Records every cluster `kafka` makes from now on (one per consumer, producer or admin
 * client), so that forgetTopics reaches the metadata of each. Call it once, before any
 * client is made (createKafka does).
 */
export function trackClusters(kafka: Kafka): Kafka {
  const target = kafka as unknown as Record<symbol, unknown>;
  if (target[CLUSTERS] !== undefined) return kafka;
  // Weakly held: a replica makes clients for as long as it runs (an admin per offset read
  // with fresh metadata, a consumer per restart); a cluster nothing else uses is let go.
  const clusters = new Set<WeakRef<InternalCluster>>();
  wrapClusterFactory<InternalCluster>(kafka, (own) => (options) => {
    const cluster = own(options);
    for (const ref of clusters) if (ref.deref() === undefined) clusters.delete(ref);
    clusters.add(new WeakRef(cluster));
    return cluster;
  });
  target[CLUSTERS] = clusters;
  return kafka;
}

/**
 * Takes deleted topics out of the metadata every client of a tracked `kafka` refreshes.
 * kafkajs keeps each topic a client ever asked about (a subscription, an admin's
 * fetchTopicOffsets) in its cluster's target topics and asks the broker for their
 * metadata on every refresh; one deleted topic then fails every refresh
 * (UNKNOWN_TOPIC_OR_PARTITION): the consumer crashes and restarts forever, and every
 * claim's offset read fails, stalling the topics that still exist. A stopped consumer's
 * subscription still names the topic, which is harmless: an assignor gives no partition
 * of a topic without metadata.
 */
export function forgetTopics(kafka: Kafka, topics: readonly string[]): void {
  const clusters = (kafka as unknown as Record<symbol, Set<WeakRef<InternalCluster>> | undefined>)[CLUSTERS];
  if (clusters === undefined)
    throw new CoordinatorHookError('the Kafka instance does not track its clusters');
  for (const ref of clusters) {
    const cluster = ref.deref();
    if (cluster === undefined) {
      clusters.delete(ref);
      continue;
    }
    if (!(cluster.targetTopics instanceof Set)) throw new CoordinatorHookError('no cluster.targetTopics');
    for (const topic of topics) cluster.targetTopics.delete(topic);
    // An admin reuses its metadata (admin-metadata.ts): its next lookup reads it without them.
    if (cluster.brokerPool !== undefined) cluster.brokerPool.metadataExpireAt = null;
  }
}

function hookCluster(cluster: InternalCluster, hook: CoordinatorHook & Partial<FetchHook>): InternalCluster {
  for (const method of ['findGroupCoordinator', 'findBroker'] as const) {
    const find = cluster[method];
    if (typeof find !== 'function') throw new CoordinatorHookError(`no cluster.${method}`);
    cluster[method] = async (request: unknown) => hookBroker(await find.call(cluster, request), hook);
  }
  return cluster;
}

function hookBroker(broker: InternalBroker, hook: CoordinatorHook & Partial<FetchHook>): InternalBroker {
  const marked = broker as InternalBroker & { [HOOKED]?: true };
  if (marked[HOOKED]) return broker;
  const { syncGroup, offsetCommit, fetch } = broker;
  if (typeof syncGroup !== 'function' || typeof offsetCommit !== 'function' || typeof fetch !== 'function')
    throw new CoordinatorHookError('no broker.syncGroup/offsetCommit/fetch');
  broker.syncGroup = async (request) => {
    const answer = await syncGroup.call(broker, request);
    hook.synced(request.memberId, request.generationId);
    return answer;
  };
  broker.offsetCommit = async (request) => {
    hook.beforeCommit(request);
    const answer = await offsetCommit.call(broker, request);
    hook.committed(request);
    return answer;
  };
  const { fetched, offsetOutOfRange, corruptBatch, misframedBatch } = hook;
  if (fetched && offsetOutOfRange && corruptBatch && misframedBatch) {
    // Partitions asked in the Java consumer's order (fetch-order.ts), where kafkajs's own
    // fetch can be sent unshuffled; otherwise kafkajs shuffles them.
    const order = new FetchOrder();
    const unshuffled = unshuffledFetch(broker);
    const send: (request: FetchRequest) => Promise<FetchResponse> =
      unshuffled === undefined
        ? (request) => fetch.call(broker, request)
        : async (request) => {
            const ordered = { ...request, topics: order.order(request.topics) };
            const answer = await unshuffled(ordered);
            order.answered(ordered, answer);
            return answer;
          };
    broker.fetch = async (asked) => {
      const request = decompressedSized(asked, fetchExpansion);
      let answer: FetchResponse;
      let answered = request;
      try {
        answer = await send(request);
        fetchExpansion.answered(heldRecords(answer));
      } catch (error) {
        if (error instanceof CorruptCompressedBatchError) {
          const found = await corruptPartition((r) => fetch.call(broker, r), request);
          // Not found (the damage was in transit): kafkajs fetches everything again.
          if (!found) return { responses: [] };
          if ('error' in found) {
            corruptBatch.call(hook, found.topic, found.partition, Number(found.fetchOffset), found.error);
            return { responses: [] };
          }
          // The batches before the corrupt one are delivered, one per fetch, until it is first.
          answered = found.request;
          answer = found.answer;
        } else {
          const refused = offsetOutOfRangeIn(error);
          if (!refused) throw error;
          const fetchOffset = request.topics
            .find((t) => t.topic === refused.topic)
            ?.partitions.find((p) => p.partition === refused.partition)?.fetchOffset;
          if (fetchOffset === undefined) throw error;
          await offsetOutOfRange.call(hook, refused.topic, refused.partition, Number(fetchOffset));
          // The other partitions of this fetch were not consumed: kafkajs fetches them again.
          return { responses: [] };
        }
      }
      const batches: FetchedBatch[] = [];
      for (const { topicName, partitions } of answer.responses) {
        const asked = answered.topics.find((t) => t.topic === topicName)?.partitions ?? [];
        for (const data of partitions) {
          hideAbortedRecords(data);
          for (const misframed of misframedBatches.take(data.messages))
            misframedBatch.call(hook, topicName, data.partition, misframed);
          const fetchOffset = asked.find((p) => p.partition === data.partition)?.fetchOffset;
          if (fetchOffset !== undefined) batches.push(fetchedBatch(topicName, fetchOffset, data));
        }
      }
      fetched.call(hook, batches);
      return answer;
    };
  }
  marked[HOOKED] = true;
  return broker;
}

/** Whether a fetch's answer brought any data record (of any partition; a transaction marker is none). */
export function heldRecords(answer: FetchResponse): boolean {
  return answer.responses.some((t) => t.partitions.some((p) => p.messages?.some((m) => !m.isControlRecord)));
}

/** Fetch sizes below which a request is never scaled down (the broker returns a whole first batch anyway). */
const MIN_FETCH_BYTES = 256 * 1024;
const MIN_PARTITION_FETCH_BYTES = 64 * 1024;

/**
 * The request with its sizes (compressed bytes) divided by how much fetched batches grow
 * when decompressed (compression/expansion.ts): a fetch of a compressed topic holds about
 * as many record bytes as one of an uncompressed topic, within the memory budget.
 *
 * A scaled size can be below one batch, and the broker returns a whole batch over the
 * limits only for the first partition of a request with one (KIP-74): the order the
 * partitions are asked in (fetch-order.ts, or kafkajs's shuffle) brings each to the front
 * in turn, so none is starved.
 */
export function decompressedSized(request: FetchRequest, expansion: FetchExpansion): FetchRequest {
  if (expansion.ratio <= 1) return request;
  const scaled = request.topics.map((t) => ({
    ...t,
    partitions: t.partitions.map((p) =>
      p.maxBytes === undefined
        ? p
        : { ...p, maxBytes: expansion.scaled(p.maxBytes, MIN_PARTITION_FETCH_BYTES) },
    ),
  }));
  return {
    ...request,
    ...(request.maxBytes === undefined
      ? {}
      : { maxBytes: expansion.scaled(request.maxBytes, MIN_FETCH_BYTES) }),
    topics: scaled,
  };
}

/**
 * Where the corrupt batch of a failed fetch lies: the response fails to decode as a
 * whole, so each partition is fetched again alone (the log does not change under a fetch
 * offset), first for its first batch only (maxBytes 1: the broker still returns one whole
 * batch), then in full. These fetches do not wait for data (maxWaitTime 0, minBytes 0):
 * with kafkajs's 5 s wait an idle partition would cost 10 s, and a few of them the
 * group's session. A partition whose first batch is corrupt is the answer (`error`);
 * one whose corrupt batch comes later answers with its first batch, so that what precedes
 * the corrupt batch is delivered. Undefined when no partition fails alone.
 */
export async function corruptPartition(
  fetch: (request: FetchRequest) => Promise<FetchResponse>,
  failed: FetchRequest,
): Promise<
  | { topic: string; partition: number; fetchOffset: string; error: CorruptCompressedBatchError }
  | { request: FetchRequest; answer: FetchResponse }
  | undefined
> {
  const request: FetchRequest = { ...failed, maxWaitTime: 0, minBytes: 0 };
  for (const { topic, partitions } of request.topics)
    for (const asked of partitions) {
      const firstBatch: FetchRequest = {
        ...request,
        topics: [{ topic, partitions: [{ ...asked, maxBytes: 1 }] }],
      };
      let first: FetchResponse;
      try {
        first = await fetch(firstBatch);
      } catch (error) {
        if (!(error instanceof CorruptCompressedBatchError)) throw error;
        return { topic, partition: asked.partition, fetchOffset: asked.fetchOffset, error };
      }
      try {
        await fetch({ ...request, topics: [{ topic, partitions: [asked] }] });
      } catch (error) {
        if (!(error instanceof CorruptCompressedBatchError)) throw error;
        return { request: firstBatch, answer: first };
      }
    }
  return undefined;
}
