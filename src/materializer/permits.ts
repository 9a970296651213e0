import PQueue from 'p-queue';

/**
 * Fetch or decode permits, shared by every publication of a process: one p-queue
 * (6.6.2, the last CommonJS release: jest cannot load the ESM-only ones) per kind.
 * A task holds its slot until its promise settles — p-queue frees it in the task's
 * own `finally` — so a blocking decode keeps its permit even when the publication
 * that started it failed or stopped waiting. p-queue's `timeout` option is never
 * set: it would free the slot while the task still runs.
 */
export class Permits {
  readonly #queue: PQueue;
  waitSecondsTotal = 0;
  waits = 0;
  /** Individual waits since the last drain (for a histogram), bounded. */
  #recentWaits: number[] = [];

  constructor(
    readonly kind: 'fetch' | 'decode',
    readonly capacity: number,
  ) {
    if (!Number.isSafeInteger(capacity) || capacity < 1)
      throw new RangeError(`${kind} permits: capacity ${capacity}`);
    this.#queue = new PQueue({ concurrency: capacity });
  }

  /** Tasks running now (holding a slot). */
  get inUse(): number {
    return this.#queue.pending;
  }

  drainWaits(): number[] {
    const waits = this.#recentWaits;
    this.#recentWaits = [];
    return waits;
  }

  /** Runs `task` once a slot is free (first come, first served) and holds the slot until it settles. */
  run<T>(task: () => Promise<T>): Promise<T> {
    const queued = this.#queue.pending >= this.capacity || this.#queue.size > 0;
    const started = performance.now();
    return this.#queue.add(() => {
      if (queued) this.#recordWait((performance.now() - started) / 1000);
      return task();
    });
  }

  #recordWait(seconds: number): void {
    this.waitSecondsTotal += seconds;
    this.waits += 1;
    if (this.#recentWaits.length < 10_000) this.#recentWaits.push(seconds);
  }
}
