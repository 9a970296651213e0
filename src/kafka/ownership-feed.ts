import type { Admin } from 'kafkajs';
import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import type { ResolvedConsumer } from '../config';
import { decodeChain } from '../ownership/chain';
import type { OwnershipRow } from '../ownership/partition-ownership';
import { SequencedSnapshots } from '../ownership/snapshots';
import { groupTopics } from './group-topics';

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
    this.#snapshots = new SequencedSnapshots(() => readOwnership(admin, consumer), apply);
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

async function readOwnership(admin: Admin, consumer: ResolvedConsumer): Promise<OwnershipRow[]> {
  const topics = await groupTopics(admin, consumer);
  if (topics.length === 0) return [];
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
