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

  constructor(
    admin: Admin,
    consumer: ResolvedConsumer,
    apply: (rows: readonly OwnershipRow[], sequence: number) => void,
    logger: Logger,
  ) {
    this.#logger = logger;
    this.#snapshots = new SequencedSnapshots(ownershipReader(admin, consumer), apply);
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
 * Reads the group's ownership rows, one read at a time (SequencedSnapshots). A topic that
 * leaves the group's topic list (a deleted topic a pattern matched; Kafka drops its
 * committed offsets with it) keeps its last known rows, marked final: its sealed parts
 * committed before the deletion are still published, up to the last commit seen and no
 * further. A topic back in the list (recreated) is read anew.
 */
export function ownershipReader(admin: Admin, consumer: ResolvedConsumer): () => Promise<OwnershipRow[]> {
  const gone = new Map<string, OwnershipRow[]>();
  let last: readonly OwnershipRow[] = [];
  return async () => {
    const topics = await groupTopics(admin, consumer);
    const live = topics.length === 0 ? [] : await readOwnership(admin, consumer, topics);
    const listed = new Set(topics);
    for (const topic of gone.keys()) if (listed.has(topic)) gone.delete(topic);
    for (const [topic, partition, ownership] of last) {
      if (listed.has(topic) || ownership.final) continue;
      let rows = gone.get(topic);
      if (!rows) gone.set(topic, (rows = []));
      rows.push([topic, partition, { ...ownership, final: true }]);
    }
    last = live;
    return [...live, ...[...gone.values()].flat()];
  };
}

async function readOwnership(
  admin: Admin,
  consumer: ResolvedConsumer,
  topics: string[],
): Promise<OwnershipRow[]> {
  const committed = await admin.fetchOffsets({ groupId: consumer.groupId, topics });
  return committed.flatMap((t) =>
    t.partitions
      .filter((p) => Number(p.offset) >= 0)
      .map((p): OwnershipRow => [
        t.topic,
        p.partition,
        { chain: decodeChain(p.metadata), committed: Number(p.offset) },
      ]),
  );
}
