import type { Consumer, ConsumerConfig, Kafka } from 'kafkajs';

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
}
interface InternalCluster {
  findGroupCoordinator: (request: unknown) => Promise<InternalBroker>;
  findBroker: (request: unknown) => Promise<InternalBroker>;
}
type CreateCluster = (options: unknown) => InternalCluster;

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
export function createHookedConsumer(kafka: Kafka, config: ConsumerConfig, hook: CoordinatorHook): Consumer {
  const target = kafka as unknown as Record<symbol, CreateCluster | undefined>;
  const key = Object.getOwnPropertySymbols(kafka).find((s) => s.description === CREATE_CLUSTER);
  const original = key ? target[key] : undefined;
  if (!key || typeof original !== 'function') throw new CoordinatorHookError(`no ${CREATE_CLUSTER}`);
  target[key] = (options: unknown) => hookCluster(original(options), hook);
  try {
    return kafka.consumer(config);
  } finally {
    target[key] = original;
  }
}

function hookCluster(cluster: InternalCluster, hook: CoordinatorHook): InternalCluster {
  for (const method of ['findGroupCoordinator', 'findBroker'] as const) {
    const find = cluster[method];
    if (typeof find !== 'function') throw new CoordinatorHookError(`no cluster.${method}`);
    cluster[method] = async (request: unknown) => hookBroker(await find.call(cluster, request), hook);
  }
  return cluster;
}

function hookBroker(broker: InternalBroker, hook: CoordinatorHook): InternalBroker {
  const marked = broker as InternalBroker & { [HOOKED]?: true };
  if (marked[HOOKED]) return broker;
  const { syncGroup, offsetCommit } = broker;
  if (typeof syncGroup !== 'function' || typeof offsetCommit !== 'function')
    throw new CoordinatorHookError('no broker.syncGroup/offsetCommit');
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
  marked[HOOKED] = true;
  return broker;
}
