import type { Consumer } from 'kafkajs';
import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import { commitAnswered } from '../faults/crash-points';
import type { CommitFence } from '../ownership/commit-fence';
import type { GroupMembership } from '../ownership/membership';
import type { OffsetTracker, PartitionCommit } from '../ownership/offset-tracker';
import type { IngestionEvents } from './ingestion-events';

/** What the committer works with. */
export interface OffsetCommitterDeps {
  /** The generation a commit is decided in. */
  readonly membership: Pick<GroupMembership, 'current'>;
  readonly fence: Pick<CommitFence, 'commit'>;
  /** Told what landed. */
  readonly tracker: Pick<OffsetTracker, 'landed'>;
  readonly logger: Logger;
  readonly events: Pick<IngestionEvents, 'committed' | 'commitUnsent' | 'commitRefused'>;
}

/**
 * Sends the commits the offset tracker decides, fenced to the generation they were
 * decided in, each with its partition's ownership chain as metadata; records what
 * landed. The claims of a join send through it too (`send`), inside their own fence turn.
 */
export class OffsetCommitter {
  readonly #deps: OffsetCommitterDeps;
  readonly #consumer: Pick<Consumer, 'commitOffsets'>;
  /** Data commits the broker answered as landed (the test-only killAtCommit counts them). */
  #answered = 0;

  constructor(deps: OffsetCommitterDeps, consumer: Pick<Consumer, 'commitOffsets'>) {
    this.#deps = deps;
    this.#consumer = consumer;
  }

  /** Commits decided now (in the current generation), fenced to it. */
  async commit(commits: readonly PartitionCommit[]): Promise<void> {
    const s = this.#deps;
    const generation = s.membership.current;
    if (commits.length === 0 || !generation) return;
    const outcome = await s.fence.commit(generation, () => this.send(commits));
    if (outcome.kind === 'landed') {
      this.#answered += 1;
      commitAnswered(this.#answered); // test-only fault: may die here, before recording the answer
      s.tracker.landed(commits);
      s.events.committed(commits);
    } else if (outcome.kind === 'not-sent') {
      // kafkajs's runner was not running (a crash-restart or rejoin): nothing reached
      // the broker. The next tick recomputes the commit from what is still owned.
      s.events.commitUnsent();
      s.logger.warn({ event: 'kafka.commit.unsent' }, 'offset commit not sent (consumer restarting)');
    } else {
      // A refused commit (rebalance, stale generation, fenced) did not land; it is never
      // retried into a generation that no longer owns the partition: the next tick
      // recomputes commits from the current assignment.
      s.events.commitRefused();
      s.logger.warn(
        { event: 'kafka.commit.refused', err: errorMessage(outcome.error) },
        'offset commit refused',
      );
    }
  }

  /** Commits exactly these offsets, each with its partition's ownership chain as metadata. */
  async send(commits: readonly PartitionCommit[]): Promise<void> {
    await this.#consumer.commitOffsets(
      commits.map((c) => ({
        topic: c.topic,
        partition: c.partition,
        offset: String(c.offset),
        metadata: c.metadata,
      })),
    );
  }
}
