import type { Admin, ITopicConfig } from 'kafkajs';
import { KafkaLanceError, errorMessage } from '../../common/errors';
import { isFlaggedRetriable } from './kafka-errors';

/** How long a new topic may take to be served before that is an error. */
const DEFAULT_TIMEOUT_MS = 60_000;
const RETRY_MS = 200;

/** Every partition of a topic did not answer its log offsets within the time given. */
export class TopicNotServedError extends KafkaLanceError {
  constructor(
    readonly topic: string,
    readonly waitedMs: number,
    lastError: unknown,
  ) {
    super(
      'TOPIC_NOT_SERVED',
      `topic ${topic}: not every partition answered within ${Math.round(waitedMs / 1000)} s` +
        (lastError === undefined ? '' : ` (last answer: ${errorMessage(lastError)})`),
      { retriable: true, cause: lastError, context: { topic, waitedMs } },
    );
  }
}

/**
 * Creates the topics that do not exist yet, then returns once every partition of every
 * topic given answers. `createTopics({ waitForLeaders })` returns once the metadata names
 * a leader, but a broker that just started (the demo's embedded one) still answers
 * "not the leader for that topic-partition" to the first requests after that: a command
 * that produces or reads offsets straight away failed on its first run. Returns the
 * names of the topics it created.
 */
export async function ensureTopicsServed(
  admin: Admin,
  topics: readonly ITopicConfig[],
  timeoutMs = DEFAULT_TIMEOUT_MS,
): Promise<string[]> {
  const started = Date.now();
  const existing = new Set(await admin.listTopics());
  const missing = topics.filter((t) => !existing.has(t.topic));
  // Another process may create one of them meanwhile: createTopics then answers false
  // for it, and the wait below is what counts. A broker that is still starting can fail
  // the creation's own wait for leaders with a retriable error ("does not host this
  // topic-partition"): that is retried within the same time, anything else is thrown.
  for (;;) {
    try {
      if (missing.length > 0) await admin.createTopics({ topics: [...missing], waitForLeaders: true });
      break;
    } catch (error) {
      if (!isFlaggedRetriable(error) || Date.now() - started >= timeoutMs) throw error;
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }
  // A topic that existed keeps its own partition count (the caller checks it if it must).
  for (const t of topics) {
    const created = missing.includes(t);
    await untilTopicServed(admin, t.topic, created ? t.numPartitions : undefined, timeoutMs);
  }
  return missing.map((t) => t.topic);
}

/**
 * Returns once every partition of `topic` answers its log offsets (all `partitions` of
 * them when given). Every error meanwhile is retried: they are the transient answers of
 * a topic being created or a leader being elected; the last one is in the timeout error.
 */
export async function untilTopicServed(
  admin: Admin,
  topic: string,
  partitions?: number,
  timeoutMs = DEFAULT_TIMEOUT_MS,
): Promise<void> {
  const started = Date.now();
  let lastError: unknown;
  for (;;) {
    try {
      const answered = await admin.fetchTopicOffsets(topic);
      if (answered.length > 0 && (partitions === undefined || answered.length >= partitions)) return;
      lastError = new Error(`${answered.length} of ${partitions ?? '?'} partitions answered`);
    } catch (error) {
      lastError = error;
    }
    const waited = Date.now() - started;
    if (waited >= timeoutMs) throw new TopicNotServedError(topic, waited, lastError);
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
}
