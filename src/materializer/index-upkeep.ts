import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import type { IndexSpec } from '../config/index-spec';
import { IndexKeeper, type IndexReport } from '../lance/index-keeper';
import type { LanceTarget } from '../lance/lance-table';
import type { SharedConnections } from '../lance/connect';
import { crashPointAfter } from '../faults/crash-points';

/** How long an index build runs before the test crash point 'during-index-build' fires. */
const CRASH_INTO_BUILD_MS = 100;

/** What the upkeep asks of the materializer it runs beside. */
export interface TableKeeperRole {
  maintainsTable(): boolean;
  /** Whether index commits may run beside the publications (commit-rule.ts). */
  commitsBesidePublications(): boolean;
}

/**
 * Index rounds of a worker's tables running at once, at most `max`: with many tables a
 * round per table due at the same moment would build every table's indexes together.
 */
export class UpkeepSlots {
  running = 0;
  constructor(readonly max: number) {}
}

/**
 * The declared indexes' schedule in the materializer's thread: a round every
 * `everyMs`, started in the background so that the publication loop never waits for a
 * build (LanceDB works off the JavaScript thread), one round at a time, only on the
 * replica that compacts, and not on a store without atomic commits (a declared single
 * writer's): the round runs beside the publications, and there its commit could
 * overwrite one of theirs.
 */
export class IndexUpkeep {
  #keeper: IndexKeeper | undefined;
  #running: Promise<void> | undefined;
  #last = 0;
  #offLogged = false;
  readonly #stopping = new AbortController();

  constructor(
    private readonly target: LanceTarget,
    private readonly specs: readonly IndexSpec[],
    private readonly everyMs: number,
    private readonly role: TableKeeperRole,
    private readonly logger: Logger,
    private readonly onReports: (reports: readonly IndexReport[]) => void,
    /** Shared by the upkeeps of a worker's tables (table-set.ts); absent: this table's alone. */
    private readonly slots: UpkeepSlots = new UpkeepSlots(1),
    /** The worker's connections (one per database, shared by its tables); absent: the keeper's own. */
    private readonly connections?: SharedConnections,
  ) {}

  /** Starts a round when one is due; never waits for it. */
  tick(now = Date.now()): void {
    if (this.specs.length === 0 || this.everyMs === 0 || this.#running || this.#stopping.signal.aborted)
      return;
    if (now - this.#last < this.everyMs || !this.role.maintainsTable()) return;
    if (!this.role.commitsBesidePublications()) {
      if (!this.#offLogged) {
        this.#offLogged = true;
        this.logger.info(
          { event: 'lance.index.off', reason: 'store without atomic commits' },
          'declared indexes are not built beside the publications of a single writer on a store without atomic commits: run kafka-lance compact while the replica is stopped',
        );
      }
      return;
    }
    // Another table's round holds the slots: this one waits for a later tick, not a whole everyMs.
    if (this.slots.running >= this.slots.max) return;
    this.slots.running += 1;
    this.#last = now;
    this.#running = this.#round().finally(() => {
      this.slots.running -= 1;
      this.#running = undefined;
    });
  }

  async #round(): Promise<void> {
    try {
      this.#keeper ??= await IndexKeeper.connect(
        this.target,
        this.specs,
        this.logger,
        () => crashPointAfter('during-index-build', CRASH_INTO_BUILD_MS),
        this.connections,
      );
      const reports = await this.#keeper.maintain(this.#stopping.signal);
      if (!this.#stopping.signal.aborted) this.onReports(reports);
    } catch (error) {
      this.logger.warn(
        { event: 'lance.index.failed', err: errorMessage(error) },
        'index maintenance failed; will try again',
      );
    }
  }

  /** A round in flight begins no further build, retry or update; no round starts after it. */
  abort(): void {
    this.#stopping.abort();
  }

  /**
   * Ends the upkeep: a round in flight begins no further build, retry or update, and
   * its one native call in flight is waited for (never abandoned mid-call: a thread
   * ended under a LanceDB call can take the process down), then the keeper closes.
   */
  async stop(): Promise<void> {
    this.#stopping.abort();
    await this.#running;
    this.#keeper?.close();
  }
}
