/**
 * How much the compressed record batches this process fetched lately grow when
 * decompressed. Fetch sizes are in compressed bytes (up to `queue.maxBytes`, 16 MiB, a
 * partition and a fetch: src/kafka/fetch-sizes.ts), and every batch of a fetch is
 * decompressed before any is handed out: a topic that compresses 12× would hold 192 MiB of records per fetch,
 * beyond the memory budget (docs/design/memory.md). The fetch hook divides the sizes it
 * asks for by this ratio, so that a fetch holds about as many bytes decompressed as an
 * uncompressed one does.
 */
export class FetchExpansion {
  #ratio = 1;
  #answered = false;

  /**
   * The moving ratio (decompressed / compressed bytes, at least 1) of recent batches; until
   * a fetch brought records, at least FIRST_FETCH_RATIO: nothing is known yet, and a first
   * fetch of a compressed backlog would hold the most. A fetch that brought none (an empty
   * topic, a replica caught up at start) says nothing of what the next one holds: a
   * compressed backlog produced later is still fetched under the guard.
   */
  get ratio(): number {
    return this.#answered ? this.#ratio : Math.max(this.#ratio, FIRST_FETCH_RATIO);
  }

  /** A fetch was answered; `withRecords` when it brought any (its batches, compressed or not, observed). */
  answered(withRecords: boolean): void {
    if (withRecords) this.#answered = true;
  }

  /** One batch decompressed: its bytes before and after. */
  observe(compressedBytes: number, plainBytes: number): void {
    if (compressedBytes <= 0) return;
    const ratio = Math.max(1, plainBytes / compressedBytes);
    // Up at once (memory), down slowly (a few small batches must not reopen the fetch).
    this.#ratio = ratio > this.#ratio ? ratio : this.#ratio + (ratio - this.#ratio) * EASING;
  }

  /** A fetch size in compressed bytes that decompresses to about `bytes`, never below `floor`. */
  scaled(bytes: number, floor: number): number {
    const ratio = this.ratio;
    return ratio <= 1 ? bytes : Math.min(bytes, Math.max(floor, Math.floor(bytes / ratio)));
  }
}

const EASING = 0.05;
const FIRST_FETCH_RATIO = 4;

/** The process's one measure: kafkajs's codec table is one per process too. */
export const fetchExpansion = new FetchExpansion();
