import type { Admin } from 'kafkajs';
import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import type { ResolvedConsumer } from '../config';
import { decodeChain } from '../ownership/chain';
import type { OwnershipRow } from '../ownership/partition-ownership';
import { SequencedSnapshots } from '../ownership/snapshots';
import { groupTopics } from '../kafka/group-topics';

/**
 * Feeds the materializer's planner every partition's chain and landed commit, owned
 * here or not, read from the group's committed offsets every `pollMs` (sequenced: a
 * late answer never replaces a newer one).
 */
export class OwnershipFeed {
  readonly #snapshots: SequencedSnapshots<OwnershipRow[]>;
  readonly #timer: NodeJS.Timeout;
  readonly #logger: Logger;
  #draining = false;

  constructor(
    admin: Admin,
    consumer: ResolvedConsumer,
    apply: (rows: readonly OwnershipRow[], sequence: number) => void,
    logger: Logger,
  ) {
    this.#logger = logger;
    // While draining, the topic list is read afresh (a clock at infinity makes any reused list
    // too old): a topic the consumer committed in the last seconds before a SIGTERM would
    // otherwise be missing from the drain's snapshot and its parts left unpublished.
    const clock = () => (this.#draining ? Number.POSITIVE_INFINITY : Date.now());
    this.#snapshots = new SequencedSnapshots(ownershipReader(admin, consumer, clock), apply);
    void this.#refresh();
    this.#timer = setInterval(() => void this.#refresh(), consumer.materializer.pollMs);
  }

  #refresh(): Promise<void> {
    return this.#snapshots
      .refresh()
      .catch((error: unknown) =>
        this.#logger.warn(
          { event: 'materializer.ownership.failed', err: errorMessage(error) },
          'could not read offsets',
        ),
      );
  }

  /**
   * Stops the timer, then reads a snapshot after the final commit (the one in flight may
   * predate it): with it the planner sees every committed row as ready. Unreadable (broker
   * gone): the drain publishes what the last snapshot allows, the rest waits on disk.
   * Bounded by the deadline: kafkajs retries a read for tens of seconds when the broker is
   * gone, and the drain is worth nothing after the deadline.
   */
  async stop(drainUntil: number): Promise<void> {
    clearInterval(this.#timer);
    this.#draining = true;
    for (let i = 0; i < 2 && Date.now() < drainUntil; i++) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        this.#refresh(),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, drainUntil - Date.now())))),
      ]);
      clearTimeout(timer);
    }
  }
}

/**
 * How long the broker's topic list (for a pattern) is reused between reads: listing a
 * broker costs its whole metadata (~5 ms of the main thread with 1,400 topics), four times
 * a second at the default pollMs. A topic created meanwhile is read at most this much
 * later (it is consumed only from the next `topicRefreshMs` anyway).
 */
export const TOPIC_LIST_REUSED_FOR_MS = 5_000;

/**
 * Reads the group's ownership rows, one read at a time (SequencedSnapshots). A topic that
 * leaves the group's topic list (a deleted topic a pattern matched; Kafka drops its
 * committed offsets with it) keeps its last known rows, marked final: its sealed parts
 * committed before the deletion are still published, up to the last commit seen and no
 * further. A topic back in the list (recreated) is read anew. The topic list is reused for
 * TOPIC_LIST_REUSED_FOR_MS, but read again at once, after the read, when a listed topic's
 * committed offsets are gone or the read fails (a deletion): its rows are then kept and
 * marked final, never dropped.
 */
export function ownershipReader(
  admin: Admin,
  consumer: ResolvedConsumer,
  clock: () => number = Date.now,
): () => Promise<OwnershipRow[]> {
  const gone = new Map<string, OwnershipRow[]>();
  let last: readonly OwnershipRow[] = [];
  let listing: { topics: string[]; at: number } | undefined;
  const listed = async (): Promise<{ topics: string[]; fresh: boolean }> => {
    const reuseFor = Math.min(TOPIC_LIST_REUSED_FOR_MS, consumer.topicRefreshMs);
    if (listing && clock() - listing.at < reuseFor) return { topics: listing.topics, fresh: false };
    listing = { topics: await groupTopics(admin, consumer), at: clock() };
    return { topics: listing.topics, fresh: true };
  };
  const read = async (topics: string[]) =>
    topics.length === 0 ? [] : readOwnership(admin, consumer, topics);
  return async () => {
    let { topics, fresh } = await listed();
    let live: OwnershipRow[];
    try {
      live = await read(topics);
    } catch (error) {
      if (fresh) throw error;
      listing = undefined;
      ({ topics, fresh } = await listed());
      live = await read(topics);
    }
    // Listed afresh after the read that lost them, even when the list was read just before
    // it: a topic deleted between the list and the read is then absent, and its rows final.
    if (lostRows(last, live)) {
      listing = undefined;
      ({ topics } = await listed());
      live = await read(topics);
    }
    const names = new Set(topics);
    for (const topic of gone.keys()) if (names.has(topic)) gone.delete(topic);
    for (const [topic, partition, ownership] of last) {
      if (names.has(topic) || ownership.final) continue;
      let rows = gone.get(topic);
      if (!rows) gone.set(topic, (rows = []));
      rows.push([topic, partition, { ...ownership, final: true }]);
    }
    last = live;
    return [...live, ...[...gone.values()].flat()];
  };
}

/** Whether a topic with committed offsets before has none now: deleted, unless the list says otherwise. */
function lostRows(before: readonly OwnershipRow[], now: readonly OwnershipRow[]): boolean {
  const present = new Set(now.map(([topic]) => topic));
  return before.some(([topic]) => !present.has(topic));
}

/**
 * The listed topics' committed partitions. Asked without topics, kafkajs sends the group
 * coordinator one OffsetFetch for every topic the group has committed, with no metadata
 * lookup: named topics would make it look up each topic's partitions in its metadata first,
 * which for an admin is a request naming every topic it ever looked up, per topic and per
 * read (~14 a second with 200 topics), and a partition missing from those metadata (added
 * to the topic since) would be missing from the rows. A deleted topic is simply absent (its
 * commits go with it), as `lostRows` expects.
 */
async function readOwnership(
  admin: Admin,
  consumer: ResolvedConsumer,
  topics: string[],
): Promise<OwnershipRow[]> {
  const answer = new Map((await admin.fetchOffsets({ groupId: consumer.groupId })).map((t) => [t.topic, t]));
  return topics
    .flatMap((topic) => answer.get(topic) ?? [])
    .flatMap((t) =>
      t.partitions
        .filter((p) => Number(p.offset) >= 0)
        .map((p): OwnershipRow => [
          t.topic,
          p.partition,
          { chain: decodeChain(p.metadata), committed: Number(p.offset) },
        ]),
    );
}
