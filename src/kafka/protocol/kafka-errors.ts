import { KafkaJSError, KafkaJSNumberOfRetriesExceeded, KafkaJSProtocolError } from 'kafkajs';

/**
 * Every reading of a kafkajs error in one place: what the broker answered, whether the
 * group must be rejoined, whether trying again can help. kafkajs tells these apart by
 * error class, by the protocol error's `type` and by its `retriable` flag; the rest of
 * kafka-lance asks these functions instead of looking at those fields itself.
 */

/**
 * Heartbeat and commit answers that mean this member must rejoin the group before
 * anything it claims can land (kafkajs's runner rejoins on each of them).
 */
const GROUP_CHANGE_TYPES: ReadonlySet<string> = new Set([
  'REBALANCE_IN_PROGRESS',
  'UNKNOWN_MEMBER_ID',
  'ILLEGAL_GENERATION',
  'NOT_COORDINATOR_FOR_GROUP',
  'NOT_COORDINATOR',
]);

/** A heartbeat error that means this member must rejoin before anything it claims can land. */
export function isGroupChange(error: unknown): boolean {
  const type = (error as { type?: unknown } | null)?.type;
  return typeof type === 'string' && GROUP_CHANGE_TYPES.has(type);
}

/**
 * An error that leaves eachBatch so that kafkajs's runner rejoins the group: its type is
 * one the runner answers by rejoining. A plain Error (not a KafkaJSError), as thrown
 * when a claim cannot land within a session.
 */
export function rejoinRequest(message: string): Error {
  return Object.assign(new Error(message), { type: 'NOT_COORDINATOR_FOR_GROUP', retriable: true });
}

/** The type kafkajs's runner rejoins on (errors.js isRebalancing), for errors that ask it to rejoin. */
export const REJOIN_ERROR_TYPE = 'REBALANCE_IN_PROGRESS';

/** kafkajs 2.2.4 fails a whole fetch with KafkaJSOffsetOutOfRange for the first such partition. */
export function offsetOutOfRangeIn(error: unknown): { topic: string; partition: number } | undefined {
  const e = error as { name?: unknown; topic?: unknown; partition?: unknown } | null;
  if (e?.name !== 'KafkaJSOffsetOutOfRange' || typeof e.topic !== 'string' || typeof e.partition !== 'number')
    return undefined;
  return { topic: e.topic, partition: e.partition };
}

/** True when kafkajs flagged the error as worth retrying (an error without the flag is not). */
export function isFlaggedRetriable(error: unknown): boolean {
  return (error as { retriable?: unknown } | null)?.retriable === true;
}

/**
 * Broker answers to a produce that no retry can change. UNKNOWN_TOPIC_OR_PARTITION is
 * retriable in Kafka's table (a topic being created), but kafkajs has already retried it
 * when it reaches us, and kafka-lance's producers never auto-create a topic.
 */
const PERMANENT_PRODUCE_ERRORS: ReadonlySet<string> = new Set([
  'MESSAGE_TOO_LARGE',
  'RECORD_LIST_TOO_LARGE',
  'INVALID_RECORD',
  'UNKNOWN_TOPIC_OR_PARTITION',
  'INVALID_TOPIC_EXCEPTION',
  'TOPIC_AUTHORIZATION_FAILED',
  'CLUSTER_AUTHORIZATION_FAILED',
  'POLICY_VIOLATION',
]);

/** kafkajs wraps protocol errors (retries exceeded, non-retriable): find the broker's answer. */
function protocolErrorIn(error: unknown): KafkaJSProtocolError | undefined {
  for (let e = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e instanceof KafkaJSProtocolError) return e;
  }
  return undefined;
}

/** The broker refused a produce for its size (a smaller one may pass). */
export function isRefusedAsTooLarge(error: unknown): boolean {
  const type = protocolErrorIn(error)?.type;
  return type === 'MESSAGE_TOO_LARGE' || type === 'RECORD_LIST_TOO_LARGE';
}

/** How a failed produce reads: a broker answer no retry changes, or whether a retry may help. */
export type ProduceFailure =
  | { readonly kind: 'permanent'; readonly type: string; readonly message: string }
  | { readonly kind: 'transient'; readonly retriable: boolean };

export function produceFailureOf(error: unknown): ProduceFailure {
  const protocol = protocolErrorIn(error);
  if (protocol && PERMANENT_PRODUCE_ERRORS.has(protocol.type))
    return { kind: 'permanent', type: protocol.type, message: protocol.message };
  // Retries exceeded: transient errors that may clear (a leader moving, a broker restarting).
  const retriable =
    error instanceof KafkaJSNumberOfRetriesExceeded || !(error instanceof KafkaJSError) || error.retriable;
  return { kind: 'transient', retriable };
}
