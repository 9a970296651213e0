import type { Admin, Consumer, Kafka } from 'kafkajs';
import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import type { ResolvedConsumer } from '../config';
import { forgetTopics } from './protocol/coordinator-hook';
import { matchingTopics } from './group-topics';
import { untilTopicServed } from './protocol/topic-ready';

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
  /** Wall-clock time (a seam for tests). */
  readonly clock?: () => number;
}

/**
 * Milliseconds from `now` to the next multiple of `every` since the Unix epoch. Replicas
 * refresh at these instants, all at once: the changes they see restart their consumers
 * together, so the group rebalances about once per change, not once per replica.
 */
export function untilNextRefresh(now: number, every: number): number {
  return every - (now % every);
}

/**
 * The topics a consumer reads: its named topics, and those its patterns match on the
 * broker. kafkajs resolves a pattern once, when it subscribes, and cannot subscribe
 * while it runs; so every `topicRefreshMs` the broker's topic list is read again, and a
 * new matching topic (once every partition of it answers), or a matched one deleted,
 * restarts the consumer with the new subscription. Refreshes fall on wall-clock multiples
 * of `topicRefreshMs` (the same instants on every replica); a tick that finds a refresh
 * still running is skipped. A matched topic is let go only when two listings in a row
 * lack it (a listing can miss a topic a broker is still catching up on). Topics added
 * this way are recorded (`discovered`): read from their earliest offset
 * (initial-position.ts), so nothing written to them before the refresh is skipped.
 */
export class TopicSubscription {
  readonly #options: TopicSubscriptionOptions;
  #subscribed = new Set<string>();
  readonly #discovered = new Set<string>();
  /** Per matched topic, how many listings in a row lacked it. */
  readonly #absent = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  /** The refresh running now, if any. */
  #refreshing: Promise<void> | undefined;
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

  /** Reads the broker's topics at every multiple of topicRefreshMs (with patterns only). */
  schedule(): void {
    const o = this.#options;
    if (o.consumer.topicPatterns.length === 0 || this.#stopped) return;
    const clock = o.clock ?? Date.now;
    const next = () => {
      if (this.#stopped) return;
      this.#timer = setTimeout(
        () => {
          void this.refresh();
          next();
        },
        untilNextRefresh(clock(), o.consumer.topicRefreshMs),
      );
      this.#timer.unref();
    };
    next();
  }

  /**
   * One refresh; while one runs, that one (a tick is skipped, not queued: a slow refresh
   * must not push the next ones off the shared instants). A failure is logged and the
   * next one tries again.
   */
  refresh(): Promise<void> {
    if (this.#refreshing) return this.#refreshing;
    const running = this.#refresh()
      .catch((error: unknown) => {
        this.#options.logger.warn(
          { event: 'kafka.subscription.refresh-failed', err: errorMessage(error) },
          'could not refresh the topics the patterns match; retrying at the next refresh',
        );
      })
      .finally(() => {
        this.#refreshing = undefined;
      });
    this.#refreshing = running;
    return running;
  }

  /** No refresh starts after this; resolves once a running one has ended. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
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
    const removed: string[] = [];
    for (const topic of this.#subscribed) {
      if (named.has(topic) || wanted.includes(topic)) {
        this.#absent.delete(topic);
        continue;
      }
      const listings = (this.#absent.get(topic) ?? 0) + 1;
      this.#absent.set(topic, listings);
      if (listings >= 2) removed.push(topic);
    }
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
    for (const topic of removed) {
      this.#subscribed.delete(topic);
      this.#absent.delete(topic);
    }
  }
}
