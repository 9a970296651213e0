/**
 * The planner's view of every partition's chain and landed commit is read from the
 * broker periodically. Reads are sequenced: one at a time, each applied only if no
 * newer one was applied before it, so an answer that arrives late can never replace
 * a newer view (a stale view must only ever make parts wait, see publishableRange).
 */
export class SequencedSnapshots<T> {
  readonly #read: () => Promise<T>;
  readonly #apply: (snapshot: T, sequence: number) => void;
  #requested = 0;
  #applied = 0;
  #inFlight: Promise<void> | undefined;

  constructor(read: () => Promise<T>, apply: (snapshot: T, sequence: number) => void) {
    this.#read = read;
    this.#apply = apply;
  }

  get applied(): number {
    return this.#applied;
  }

  /** Starts a read unless one is running (then that one serves); resolves when it is applied or failed. */
  refresh(): Promise<void> {
    if (this.#inFlight) return this.#inFlight;
    const sequence = ++this.#requested;
    this.#inFlight = this.#read()
      .then((snapshot) => {
        if (sequence <= this.#applied) return;
        this.#applied = sequence;
        this.#apply(snapshot, sequence);
      })
      .finally(() => (this.#inFlight = undefined));
    return this.#inFlight;
  }
}
