import { KafkaJSError, type Admin, type Kafka } from 'kafkajs';
import { errorMessage } from '../../common/errors';
import type { Logger } from '../../common/logger';
import type { PartitionClaim, ClaimIo, RecreatedTopic } from '../../ownership/claim';
import {
  METADATA_API_KEY,
  UNKNOWN_TOPIC_OR_PARTITION,
  decodeMetadataResponse,
  encodeMetadataRequest,
  metadataVersionFor,
} from './metadata-protocol';
import { REJOIN_ERROR_TYPE } from './kafka-errors';

/** The slice of kafkajs 2.2.4's internal Broker used here (pinned, like coordinator-hook.ts). */
interface InternalBroker {
  readonly versions?: Readonly<Record<number, { readonly minVersion: number; readonly maxVersion: number }>>;
  readonly connectionPool: { send(request: ProtocolRequest): Promise<unknown> };
}
interface InternalCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  refreshMetadata(): Promise<void>;
  findControllerBroker(): Promise<InternalBroker>;
}
/** What kafkajs's Connection.send takes: `encode` must return something with `buf` and `buffer` (its Encoder's shape). */
interface ProtocolRequest {
  readonly request: {
    readonly apiKey: number;
    readonly apiVersion: number;
    readonly apiName: string;
    encode(): Promise<{ readonly buf: Buffer; readonly buffer: Buffer }>;
  };
  readonly response: {
    decode(payload: Buffer): Promise<unknown>;
    parse(decoded: unknown): Promise<unknown>;
  };
}
type CreateCluster = (options: unknown) => InternalCluster;
const CREATE_CLUSTER = 'private:Kafka:createCluster';

/**
 * Thrown from eachBatch when a topic this member consumes was recreated under its
 * name since it was claimed. Its type is one kafkajs's runner answers by rejoining the
 * group (errors.js isRebalancing), and every join claims anew: the claim then sees
 * the new topic id, drops the old incarnation's position and stamps the new id. A
 * KafkaJSError, so that kafkajs's runner does not log it as a failure of eachBatch
 * (the watch has logged why already).
 */
export class TopicRecreatedError extends KafkaJSError {
  readonly type = REJOIN_ERROR_TYPE;
  override readonly name = 'TopicRecreatedError';
  constructor(
    readonly topic: string,
    readonly claimedTopicId: string,
    readonly topicId: string,
  ) {
    super(
      `topic ${topic} was deleted and recreated (id ${claimedTopicId} when claimed, ${topicId} now); rejoining to claim the new incarnation`,
      { retriable: true },
    );
  }
}

/** kafkajs's internals are not those of 2.2.4 (it is pinned for this reason). */
export class TopicIdClientError extends Error {
  constructor(what: string) {
    super(`kafkajs internals are not as expected (${what}); kafka-lance needs kafkajs 2.2.4 exactly`);
    this.name = 'TopicIdClientError';
  }
}

/**
 * Kafka topic ids (the incarnation of a topic: a topic deleted and created again under
 * the same name gets a new one, and its offsets start at 0 again), asked with a Metadata
 * v10-12 request over a connection of kafkajs's own cluster: same brokers, same SSL,
 * same SASL (kafkajs authenticates the connection before the first request), no client
 * of our own to configure. The cluster is a private one made from the replica's Kafka
 * instance (the admin client it belongs to is never used).
 *
 * A broker before Kafka 2.8 has no topic ids: every id is then unknown (logged once),
 * and rows carry '' (an unknown incarnation), which is how kafka-lance behaved before
 * topic ids: a recreated topic is not told apart.
 */
export class TopicIds {
  readonly #cluster: InternalCluster;
  readonly #logger: Logger;
  #connected: Promise<void> | undefined;
  #warnedUnsupported = false;
  /** Topic → the id the latest claim read (the incarnation the current epoch stamps). */
  readonly #claimed = new Map<string, string>();
  /** Claimed topics whose id changed since: the member must rejoin before it stages more of them. */
  readonly #recreated = new Map<string, TopicRecreatedError>();
  readonly #watchMs: number;
  #watch: NodeJS.Timeout | undefined;
  #closed = false;

  /**
   * `watchMs`: how often the claimed topics' ids are asked again while consuming. A
   * topic deleted and recreated quickly may never make kafkajs rejoin (same partition
   * count, and kafkajs only resets a fetch position the new log does not have), so
   * without the watch the member would go on with the old incarnation's claim.
   */
  constructor(kafka: Kafka, logger: Logger, watchMs = 2_000) {
    this.#logger = logger;
    this.#cluster = captureCluster(kafka);
    this.#watchMs = watchMs;
  }

  /**
   * Throws TopicRecreatedError (kafkajs rejoins on it) when `topic` was recreated since
   * the current claim read its id. Synchronous: the watch asks the broker, not the batch.
   */
  assertCurrent(topic: string): void {
    const recreated = this.#recreated.get(topic);
    if (recreated) throw recreated;
  }

  /** The id of each named topic the broker knows; a topic it does not know, or cannot tell, is absent. */
  async lookup(topics: readonly string[]): Promise<Map<string, string>> {
    const ids = new Map<string, string>();
    if (topics.length === 0) return ids;
    this.#connected ??= this.#cluster.connect().catch((error: unknown) => {
      this.#connected = undefined;
      throw error;
    });
    await this.#connected;
    await this.#cluster.refreshMetadata();
    const broker = await this.#cluster.findControllerBroker();
    const version = metadataVersionFor(broker.versions?.[METADATA_API_KEY]?.maxVersion);
    if (version === undefined) {
      if (!this.#warnedUnsupported) {
        this.#warnedUnsupported = true;
        this.#logger.warn(
          {
            event: 'kafka.topic-ids.unsupported',
            maxVersion: broker.versions?.[METADATA_API_KEY]?.maxVersion,
          },
          'the broker answers no topic ids (Metadata v10+, Kafka 2.8+): a topic deleted and recreated under the same name cannot be told from the old one',
        );
      }
      return ids;
    }
    const answer = (await broker.connectionPool.send(metadataRequest(version, topics))) as ReturnType<
      typeof decodeMetadataResponse
    >;
    for (const t of answer) {
      if (t.name === null || t.topicId === undefined) continue;
      if (t.errorCode !== 0 && t.errorCode !== UNKNOWN_TOPIC_OR_PARTITION) {
        this.#logger.warn(
          { event: 'kafka.topic-ids.error', topic: t.name, errorCode: t.errorCode },
          'the broker answered an error for a topic id',
        );
      }
      if (t.errorCode === UNKNOWN_TOPIC_OR_PARTITION) continue;
      ids.set(t.name, t.topicId);
    }
    return ids;
  }

  #startWatch(): void {
    if (this.#watch || this.#closed) return;
    const check = async () => {
      const topics = [...this.#claimed.keys()];
      const ids = await this.lookup(topics);
      for (const t of topics) {
        const claimed = this.#claimed.get(t);
        const now = ids.get(t);
        // Absent (deleted, not yet recreated): kafkajs's own fetch errors restart it.
        if (claimed === undefined || now === undefined || now === claimed || this.#recreated.has(t)) continue;
        this.#recreated.set(t, new TopicRecreatedError(t, claimed, now));
        this.#logger.warn(
          { event: 'kafka.topic.recreated-while-consumed', topic: t, claimedTopicId: claimed, topicId: now },
          'a consumed topic was deleted and recreated under its name: rejoining the group to claim the new incarnation',
        );
      }
    };
    const schedule = () => {
      if (this.#closed) return;
      this.#watch = setTimeout(() => {
        void check()
          .catch((error: unknown) =>
            this.#logger.debug(
              { event: 'kafka.topic-ids.watch', err: errorMessage(error) },
              'topic id check failed',
            ),
          )
          .finally(schedule);
      }, this.#watchMs);
      this.#watch.unref();
    };
    schedule();
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#watch) clearTimeout(this.#watch);
    if (!this.#connected) return;
    await this.#cluster
      .disconnect()
      .catch((error: unknown) =>
        this.#logger.warn(
          { event: 'kafka.topic-ids.disconnect', err: errorMessage(error) },
          'disconnect failed',
        ),
      );
  }

  /**
   * The claim's view of incarnations (ownership/claim.ts): the topics' ids, where a
   * recreated topic's log starts, and a log line for each committed position dropped
   * because it belongs to a deleted incarnation.
   */
  claimIo(admin: Admin): Pick<ClaimIo, 'topicIds' | 'logStart' | 'recreated'> {
    return {
      topicIds: async (topics) => {
        const ids = await this.lookup(topics);
        for (const t of topics) {
          this.#recreated.delete(t);
          const id = ids.get(t);
          if (id === undefined) this.#claimed.delete(t);
          else this.#claimed.set(t, id);
        }
        this.#startWatch();
        return ids;
      },
      logStart: async (topic, partition) => {
        const offsets = await admin.fetchTopicOffsets(topic);
        return Number(offsets.find((o) => o.partition === partition)?.low ?? 0);
      },
      recreated: (r: RecreatedTopic) =>
        this.#logger.warn(
          {
            event: 'kafka.topic.recreated',
            topic: r.topic,
            partition: r.partition,
            topicId: r.topicId,
            previousTopicId: r.previousTopicId,
            droppedOffset: r.droppedOffset,
            start: r.start,
          },
          'the committed offset of this partition belongs to a deleted incarnation of the topic (same name, other topic id): consuming the new one from its log start',
        ),
    };
  }
}

/** Topic → id of the claims that know it: what the staging epoch stamps on every row. */
export function topicIdsOf(claims: readonly PartitionClaim[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const c of claims) if (c.topicId !== undefined) out[c.topic] = c.topicId;
  return out;
}

function metadataRequest(version: number, topics: readonly string[]): ProtocolRequest {
  return {
    request: {
      apiKey: METADATA_API_KEY,
      apiVersion: version,
      apiName: 'Metadata',
      encode: () => {
        const body = encodeMetadataRequest(version, topics);
        return Promise.resolve({ buf: body, buffer: body });
      },
    },
    response: {
      decode: (payload) => Promise.resolve(decodeMetadataResponse(version, payload)),
      parse: (decoded) => Promise.resolve(decoded),
    },
  };
}

/** A kafkajs cluster of this Kafka instance's configuration, made through its private factory. */
function captureCluster(kafka: Kafka): InternalCluster {
  const target = kafka as unknown as Record<symbol, CreateCluster | undefined>;
  const key = Object.getOwnPropertySymbols(kafka).find((s) => s.description === CREATE_CLUSTER);
  const create = key ? target[key] : undefined;
  if (!key || typeof create !== 'function') throw new TopicIdClientError(`no ${CREATE_CLUSTER}`);
  const cluster = create.call(kafka, {
    allowAutoTopicCreation: false,
    metadataMaxAge: 300_000,
  }) as Partial<InternalCluster>;
  for (const m of ['connect', 'disconnect', 'refreshMetadata', 'findControllerBroker'] as const) {
    if (typeof cluster[m] !== 'function') throw new TopicIdClientError(`no cluster.${m}`);
  }
  return cluster as InternalCluster;
}
