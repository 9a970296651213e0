import type { Admin, Consumer, Kafka } from 'kafkajs';
import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import type { ResolvedConsumer } from '../config';
import { forgetTopics } from './coordinator-hook';
import { matchingTopics } from './group-topics';
import { untilTopicServed } from './topic-ready';

/** A new topic whose partitions do not all answer within this long waits for the next refresh. */
const NEW_TOPIC_SERVED_WITHIN_MS = 10_000;

/** What changed in the topics a consumer reads. */
export interface SubscriptionChange {
  readonly added: readonly string[];
  readonly removed: readonly string[];
}

export interface TopicSubscriptionOptions {
  readonly consumer: ResolvedConsumer;
  /** The Kafka instance of every client of the replica (createKafka tracks their metadata). */
  readonly kafka: Kafka;
  readonly admin: Admin;
  readonly logger: Logger;
  /**
   * Stops the running kafkajs consumer (it leaves the group), runs `between`, and runs
   * it again (it joins: a rebalance, whose claims hold every rule of an ordinary one).
   */
  readonly restart: (between: (consumer: Consumer) => Promise<void>) => Promise<void>;
}

/**
 * The topics a consumer reads: its named topics, and those its patterns match on the
 * broker. kafkajs resolves a pattern once, when it subscribes, and cannot subscribe
 * while it runs; so every `topicRefreshMs` the broker's topic list is read again, and a
 * new matching topic (once every partition of it answers), or a matched one deleted,
 * restarts the consumer with the new subscription. Topics added this way are recorded
 * (`discovered`): having been created after the replica started, they are read from
 * their earliest offset whatever `fromBeginning` says, so nothing written to them
 * before the refresh is skipped.
 */
export class TopicSubscription {
  readonly #options: TopicSubscriptionOptions;
  #subscribed = new Set<string>();
  readonly #discovered = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #refreshing: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(options: TopicSubscriptionOptions) {
    this.#options = options;
  }

  /** Topics first read after the replica started: claimed from their earliest offset. */
  discovered(topic: string): boolean {
    return this.#discovered.has(topic);
  }

  /** The first subscription, before the consumer runs; a pattern that matches nothing yet is logged, not an error. */
  async subscribe(consumer: Consumer): Promise<void> {
    const o = this.#options;
    const topics = matchingTopics(o.consumer, await o.admin.listTopics());
    if (topics.length === 0) {
      o.logger.warn(
        { event: 'kafka.subscription.empty', patterns: o.consumer.topicPatterns },
        `no topic matches ${o.consumer.topicPatterns.map((p) => `/${p}/`).join(', ')} yet: ` +
          `matching topics are picked up within ${o.consumer.topicRefreshMs} ms of their creation`,
      );
    }
    await consumer.subscribe({ topics, fromBeginning: o.consumer.fromBeginning });
    this.#subscribed = new Set(topics);
  }

  /** Reads the broker's topics every topicRefreshMs (with patterns only). */
  schedule(): void {
    const o = this.#options;
    if (o.consumer.topicPatterns.length === 0 || this.#stopped) return;
    this.#timer = setInterval(() => void this.refresh(), o.consumer.topicRefreshMs);
    this.#timer.unref();
  }

  /** One refresh (refreshes never overlap); a failure is logged and the next one tries again. */
  refresh(): Promise<void> {
    this.#refreshing = this.#refreshing.then(() =>
      this.#refresh().catch((error: unknown) => {
        this.#options.logger.warn(
          { event: 'kafka.subscription.refresh-failed', err: errorMessage(error) },
          'could not refresh the topics the patterns match; retrying at the next refresh',
        );
      }),
    );
    return this.#refreshing;
  }

  /** No refresh starts after this; resolves once a running one has ended. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#refreshing;
  }

  async #refresh(): Promise<void> {
    if (this.#stopped) return;
    const o = this.#options;
    const wanted = matchingTopics(o.consumer, await o.admin.listTopics());
    const named = new Set(o.consumer.topics ?? []);
    const added: string[] = [];
    for (const topic of wanted) {
      if (this.#stopped) return;
      if (this.#subscribed.has(topic)) continue;
      try {
        await untilTopicServed(o.admin, topic, undefined, NEW_TOPIC_SERVED_WITHIN_MS);
        added.push(topic);
      } catch (error) {
        o.logger.info(
          { event: 'kafka.subscription.not-served', topic, err: errorMessage(error) },
          `topic ${topic} matches but is not served yet: picked up at a later refresh`,
        );
      }
    }
    // A named topic deleted keeps today's rules (its incarnation, recreated or not); one a
    // pattern matched is let go, so that it cannot stall the topics that still exist.
    const removed = [...this.#subscribed].filter((t) => !wanted.includes(t) && !named.has(t));
    if ((added.length === 0 && removed.length === 0) || this.#stopped) return;
    o.logger.info(
      { event: 'kafka.subscription.changed', added, removed },
      `topics changed (${added.length} new, ${removed.length} deleted): restarting the consumer (a rebalance)`,
    );
    for (const topic of added) this.#discovered.add(topic);
    await o.restart(async (consumer) => {
      forgetTopics(o.kafka, removed);
      if (added.length > 0) await consumer.subscribe({ topics: added, fromBeginning: true });
    });
    for (const topic of added) this.#subscribed.add(topic);
    for (const topic of removed) this.#subscribed.delete(topic);
  }
}
