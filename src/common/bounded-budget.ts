/**
 * A budget of records and bytes in flight, shared by everything that feeds one
 * queue. `acquire` waits (first come, first served) until both fit; that wait is the
 * backpressure that reaches Kafka's fetch loop. A single request larger than the
 * whole budget is admitted once nothing else is in flight, so it cannot deadlock.
 */
export class BoundedBudget {
  #records = 0;
  #bytes = 0;
  readonly #waiters: { records: number; bytes: number; resolve: () => void }[] = [];
  /** Total and count of waits that had to queue, for metrics (seconds). */
  waitSecondsTotal = 0;
  waits = 0;

  constructor(
    readonly maxRecords: number,
    readonly maxBytes: number,
  ) {}

  get records(): number {
    return this.#records;
  }
  get bytes(): number {
    return this.#bytes;
  }
  get waiting(): number {
    return this.#waiters.length;
  }

  acquire(records: number, bytes: number): Promise<void> {
    if (this.#waiters.length === 0 && this.#fits(records, bytes)) {
      this.#take(records, bytes);
      return Promise.resolve();
    }
    const started = performance.now();
    return new Promise((resolve) =>
      this.#waiters.push({
        records,
        bytes,
        resolve: () => {
          this.waitSecondsTotal += (performance.now() - started) / 1000;
          this.waits += 1;
          resolve();
        },
      }),
    );
  }

  release(records: number, bytes: number): void {
    this.#records -= records;
    this.#bytes -= bytes;
    if (this.#records < 0 || this.#bytes < 0) {
      throw new Error(`budget released more than it lent (${this.#records} records, ${this.#bytes} bytes)`);
    }
    while (this.#waiters.length > 0 && this.#fits(this.#waiters[0]!.records, this.#waiters[0]!.bytes)) {
      const next = this.#waiters.shift()!;
      this.#take(next.records, next.bytes);
      next.resolve();
    }
  }

  #fits(records: number, bytes: number): boolean {
    const idle = this.#records === 0 && this.#bytes === 0;
    return idle || (this.#records + records <= this.maxRecords && this.#bytes + bytes <= this.maxBytes);
  }

  #take(records: number, bytes: number): void {
    this.#records += records;
    this.#bytes += bytes;
  }
}
