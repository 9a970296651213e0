import type { DiskFullState, MaterializerStats } from './materializer-stats';

/**
 * Whether the worker's last publications met a full disk, over all its tables (one disk):
 * set when a table's report shows a new disk-full failure, cleared by any table's
 * publication since. A table that met the full disk and has not published since must not
 * hold the pause after another table's success (its state stays in its reports until it
 * publishes itself).
 */
export class DiskFullLatch {
  #full: DiskFullState | undefined;

  /** One table's report, in the order the worker sent them; returns the state after it. */
  take(stats: MaterializerStats): DiskFullState | undefined {
    if ((stats.counted.failures['disk-full'] ?? 0) > 0 && stats.diskFull) this.#full = stats.diskFull;
    else if (stats.counted.publications > 0) this.#full = undefined;
    return this.#full;
  }

  get full(): DiskFullState | undefined {
    return this.#full;
  }
}
