import type { Admin, Kafka } from 'kafkajs';
import type { CommittedOffset } from '../ownership/claim';

/** The offsets a partition's log holds now: [low, high). */
export interface LogBounds {
  readonly low: number;
  readonly high: number;
}

/** A partition the broker did not answer for, even with fresh metadata. */
export class PartitionNotAnsweredError extends Error {
  constructor(
    readonly what: 'committed offset' | 'log bounds',
    readonly missing: readonly (readonly [string, number])[],
  ) {
    super(
      `the broker did not answer the ${what} of ${missing.map(([t, p]) => `${t}[${p}]`).join(', ')} ` +
        '(a partition unknown to the cluster metadata)',
    );
    this.name = 'PartitionNotAnsweredError';
  }
}

type Partitions = readonly (readonly [string, number])[];

/**
 * Reads a group's committed offsets and partitions' log bounds for exact partitions.
 *
 * kafkajs's admin asks only for the partitions in its cached topic metadata (kept for
 * 30 s, protocol/admin-metadata.ts): a partition added to a topic meanwhile is simply
 * absent from the answer, which must never read as "no commit" (a claim would start the
 * partition over and overwrite another member's commit and chain). A partition missing
 * from an answer is asked again through a new admin client, whose metadata is fresh;
 * still missing is an error (the claim is retried), never a default.
 */
export class PartitionOffsets {
  readonly #kafka: Kafka;
  readonly #admin: Admin;
  readonly #groupId: string;

  constructor(kafka: Kafka, admin: Admin, groupId: string) {
    this.#kafka = kafka;
    this.#admin = admin;
    this.#groupId = groupId;
  }

  /** The committed offset (-1: none) and metadata of each partition, in order. */
  async committed(partitions: Partitions): Promise<CommittedOffset[]> {
    const read = async (admin: Admin, asked: Partitions) => {
      const topics = [...new Set(asked.map(([t]) => t))];
      const answer = await admin.fetchOffsets({ groupId: this.#groupId, topics });
      return asked.map(([topic, partition]) => {
        const entry = answer
          .find((t) => t.topic === topic)
          ?.partitions.find((p) => p.partition === partition);
        return entry ? { offset: Number(entry.offset), metadata: entry.metadata } : undefined;
      });
    };
    return this.#complete('committed offset', partitions, read);
  }

  /**
   * Whether the group has a committed offset for any partition of any topic (it has started
   * before). Never guessed: a broker that has just started answers "coordinator not available"
   * or "not the coordinator" for a while (kafkajs gives up on those after its own retries),
   * and reading that as "no commits" would start a pattern topic from its end; retriable
   * errors are asked again until `withinMs` has passed, then the error stops the start.
   */
  async groupHasCommits(withinMs = 60_000): Promise<boolean> {
    const deadline = Date.now() + withinMs;
    for (;;) {
      try {
        // Without topics, kafkajs asks for every topic the group has committed offsets for.
        const answer = await this.#admin.fetchOffsets({ groupId: this.#groupId });
        return answer.some((t) => t.partitions.some((p) => Number(p.offset) >= 0));
      } catch (error) {
        if (!isRetriable(error) || Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }

  /** The log start and end offsets of each partition, in order. */
  async bounds(partitions: Partitions): Promise<LogBounds[]> {
    const read = async (admin: Admin, asked: Partitions) => {
      const byTopic = new Map<string, Awaited<ReturnType<Admin['fetchTopicOffsets']>>>();
      for (const topic of new Set(asked.map(([t]) => t)))
        byTopic.set(topic, await admin.fetchTopicOffsets(topic));
      return asked.map(([topic, partition]) => {
        const p = byTopic.get(topic)?.find((o) => o.partition === partition);
        return p ? { low: Number(p.low), high: Number(p.high) } : undefined;
      });
    };
    return this.#complete('log bounds', partitions, read);
  }

  async #complete<T>(
    what: PartitionNotAnsweredError['what'],
    partitions: Partitions,
    read: (admin: Admin, asked: Partitions) => Promise<(T | undefined)[]>,
  ): Promise<T[]> {
    const answers = await read(this.#admin, partitions);
    const missing = partitions.filter((_, i) => answers[i] === undefined);
    if (missing.length > 0) {
      const fresh = this.#kafka.admin();
      await fresh.connect();
      try {
        const again = await read(fresh, missing);
        missing.forEach((tp, i) => (answers[partitions.indexOf(tp)] = again[i]));
      } finally {
        await fresh.disconnect();
      }
    }
    const unanswered = partitions.filter((_, i) => answers[i] === undefined);
    if (unanswered.length > 0) throw new PartitionNotAnsweredError(what, unanswered);
    return answers as T[];
  }
}

/**
 * kafkajs marks the errors a retry can cure (a coordinator moving or loading, a leader
 * election); once its own retries are spent it throws them wrapped (`cause`) as not retriable.
 */
function isRetriable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  if ('retriable' in error && error.retriable === true) return true;
  return 'cause' in error && error.cause !== error && isRetriable(error.cause);
}
