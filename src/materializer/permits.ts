/**
 * A counting semaphore for fetch and decode work, shared by every publication of a
 * process. A permit is a Disposable held by exactly one task; it goes back only when
 * that task really ends (even if its publication was cancelled meanwhile).
 */
export class Permits {
  #inUse = 0;
  readonly #waiters: (() => void)[] = [];
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
  }

  get inUse(): number {
    return this.#inUse;
  }

  drainWaits(): number[] {
    const waits = this.#recentWaits;
    this.#recentWaits = [];
    return waits;
  }

  async acquire(): Promise<Disposable> {
    if (this.#inUse < this.capacity && this.#waiters.length === 0) {
      this.#inUse += 1;
    } else {
      const started = performance.now();
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
      const seconds = (performance.now() - started) / 1000;
      this.waitSecondsTotal += seconds;
      this.waits += 1;
      if (this.#recentWaits.length < 10_000) this.#recentWaits.push(seconds);
    }
    let released = false;
    return {
      [Symbol.dispose]: () => {
        if (released) return;
        released = true;
        const next = this.#waiters.shift();
        // Hand the permit straight to the next waiter: inUse stays the same.
        if (next) next();
        else this.#inUse -= 1;
      },
    };
  }
}
