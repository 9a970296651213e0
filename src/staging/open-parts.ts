/**
 * Bounds the part files one staging holds open at once. Event time opens one part per
 * distinct minute, so a backfill over months would otherwise open one file per minute
 * and end in EMFILE, a crash, and the same batch again after the restart.
 *
 * A writer takes a slot before it opens its file and gives it back once the file is
 * closed (sealed or abandoned). Slots are handed out first come, first served, in
 * the order the writers were created. When a writer has to wait, `onPressure` runs so
 * the staging can seal an open writer that holds a slot: otherwise a detached writer
 * waiting for a slot could wait for open writers that seal only on a flush, while the
 * durability tick that would flush waits for the detached writer. It runs again on every
 * release while writers still wait.
 */
export class OpenPartLimit<H> {
  /** Holders in the order they got their slot; a handed-over slot is recorded at once. */
  readonly #holders = new Set<H>();
  readonly #waiters: { holder: H; grant: () => void }[] = [];

  constructor(
    readonly max: number,
    private readonly onPressure: () => void,
  ) {
    if (!Number.isSafeInteger(max) || max < 1) throw new RangeError(`maxOpenParts must be >= 1, not ${max}`);
  }

  get inUse(): number {
    return this.#holders.size;
  }

  get waiting(): number {
    return this.#waiters.length;
  }

  holds(holder: H): boolean {
    return this.#holders.has(holder);
  }

  holders(): IterableIterator<H> {
    return this.#holders.values();
  }

  acquire(holder: H): Promise<void> {
    if (this.#holders.has(holder)) return Promise.resolve();
    if (this.#holders.size < this.max) {
      this.#holders.add(holder);
      return Promise.resolve();
    }
    const granted = new Promise<void>((grant) => this.#waiters.push({ holder, grant }));
    this.onPressure();
    return granted;
  }

  release(holder: H): void {
    if (!this.#holders.delete(holder)) return;
    const next = this.#waiters.shift();
    if (next) {
      this.#holders.add(next.holder);
      next.grant();
    }
    // Parts still wait: the slots being released may be fewer than they are now (a part
    // sealed for them may have been waiting itself), so the owner looks again.
    if (this.#waiters.length > 0) this.onPressure();
  }
}
