/**
 * The brokers one consumer fetches from at once. kafkajs 2.2.4 runs a fetcher per
 * broker (consumer/fetchManager.js), each with one fetch in flight, and decodes a whole
 * answer before handing out its batches: a replica whose partitions lead on three brokers
 * holds three answers of up to `maxBytes` each. The fetch hook divides the sizes a fetch
 * asks for by this count, so that what the replica fetches at once stays near one
 * fetch's worth (`queue.maxBytes`, src/kafka/fetch-sizes.ts) however many brokers lead
 * its partitions.
 *
 * A broker counts while it fetched within the window (kafkajs waits up to `maxWaitTime`,
 * 5 s, for data on an idle partition): one whose partitions moved away counts a little
 * longer, which only makes fetches smaller for that while.
 */
export class FetchingBrokers {
  readonly #lastFetch = new Map<unknown, number>();
  readonly #changed: (brokers: number) => void;
  readonly #windowMs: number;
  #count = 0;

  /** `changed` is told each new count (a replica says so in its log). */
  constructor(changed: (brokers: number) => void = () => {}, windowMs = WINDOW_MS) {
    this.#changed = changed;
    this.#windowMs = windowMs;
  }

  /**
   * A fetch from `broker` (its node id: kafkajs may make a new Broker object for a node
   * whose address changed) begins: the brokers fetching now, this one included.
   */
  begin(broker: unknown, now = Date.now()): number {
    this.#lastFetch.set(broker, now);
    let fetching = 0;
    for (const [other, at] of this.#lastFetch) {
      if (now - at > this.#windowMs) this.#lastFetch.delete(other);
      else fetching += 1;
    }
    if (fetching !== this.#count) this.#changed((this.#count = fetching));
    return fetching;
  }
}

const WINDOW_MS = 15_000;
