/**
 * The bytes one consumer's fetches may hold, shared among the brokers it fetches from.
 * kafkajs 2.2.4 runs a fetcher per broker (consumer/fetchManager.js), each with one fetch
 * in flight; it decodes a whole answer before handing out any batch, and starts a
 * broker's next fetch only once every batch of the last was handled (fetcher.js). So what
 * a consumer holds at once is, per broker, the fetch in flight (up to what it asked for)
 * or its last answer, until that broker's next fetch begins.
 *
 * Each fetch asks for the least of:
 * - what the budget has left after the other brokers' fetches in flight and answers held
 *   (so a fetch begun while another broker's answer waits behind a slow batch stays small);
 * - an equal share among the brokers whose last answers brought records (a broker whose
 *   partitions are caught up, long-polling empty, takes no share);
 * - twice what this broker's last answer brought (a broker that was idle grows back to its
 *   share in a few round trips, instead of reserving a share for an empty poll);
 * and never less than the caller's floor. Bytes are decompressed record bytes: the fetch
 * hook turns them into a fetch's compressed size (compression/expansion.ts).
 *
 * A broker that has not begun a fetch for IDLE_MS is forgotten: its partitions moved away
 * (a rebalance), or its answer waits that long behind a batch (a registry outage), which
 * is then no longer counted.
 */
export class FetchBudget {
  readonly #brokers = new Map<unknown, BrokerShare>();
  readonly #changed: (brokers: number) => void;
  #count = 0;

  /** `changed` is told the number of brokers fetching, each time it changes (a replica logs it). */
  constructor(changed: (brokers: number) => void = () => {}) {
    this.#changed = changed;
  }

  /**
   * A fetch from `broker` (its node id) begins, its previous answer handled: the record
   * bytes it may ask for, out of `budget` for all brokers.
   */
  begin(broker: unknown, budget: number, floor: number, now = Date.now()): number {
    for (const [other, share] of this.#brokers)
      if (other !== broker && share.inFlight === 0 && now - share.at > IDLE_MS) this.#brokers.delete(other);
    const share = this.#brokers.get(broker) ?? { inFlight: 0, held: 0, last: undefined, at: now };
    this.#brokers.set(broker, share);
    share.held = 0;
    let others = 0;
    let busy = 0;
    for (const [other, s] of this.#brokers) {
      if (other !== broker) others += s.inFlight + s.held;
      if (s.last === undefined || s.last >= floor) busy += 1;
    }
    const room = budget - others;
    const equal = budget / Math.max(1, busy);
    const growth = share.last === undefined ? budget : 2 * share.last;
    const ask = Math.max(floor, Math.floor(Math.min(room, equal, growth)));
    share.inFlight = ask;
    share.at = now;
    if (this.#brokers.size !== this.#count) this.#changed((this.#count = this.#brokers.size));
    return ask;
  }

  /** The broker's fetch was answered with `bytes` of records, held until its next fetch begins. */
  answered(broker: unknown, bytes: number): void {
    const share = this.#brokers.get(broker);
    if (!share) return;
    share.inFlight = 0;
    share.held = bytes;
    share.last = bytes;
  }

  /** The broker's fetch failed: nothing of it is held. */
  failed(broker: unknown): void {
    const share = this.#brokers.get(broker);
    if (!share) return;
    share.inFlight = 0;
    share.held = 0;
  }
}

interface BrokerShare {
  /** What its fetch in flight asked for (0: none in flight). */
  inFlight: number;
  /** Record bytes of its last answer, until its next fetch begins. */
  held: number;
  /** Record bytes its last answer brought; undefined before its first. */
  last: number | undefined;
  /** When its last fetch began. */
  at: number;
}

const IDLE_MS = 60_000;
