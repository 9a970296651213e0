import type { DeadLetterReason, DeadLetterVerdict } from './dead-letter-reason';

/** The most frequent kind of dead letter in a window, with one example of its detail. */
export interface CommonCause {
  readonly reason: DeadLetterReason;
  readonly field: string | undefined;
  readonly detail: string;
  readonly count: number;
}

/** The window went over its share of dead letters at this batch. */
export interface RatioExceeded {
  /** The oldest dead letter still in the window: nothing from it on may be committed. */
  readonly firstOffending: number;
  readonly deadLetters: number;
  readonly records: number;
  readonly common: CommonCause;
}

/** Distinct (reason, field) kinds kept apart; more (fields of an inferred schema) share the last slot. */
const MAX_KINDS = 64;

/**
 * A window that has not filled yet (a partition's first `size` records since start, or a
 * quiet partition's) is judged once it holds this many records, or `size` when smaller.
 */
export const MIN_JUDGED_RECORDS = 100;

/**
 * The last `size` records of one partition, each good or a kind of dead letter, in
 * typed arrays (a fixed few bytes per record, whatever the traffic). It judges the records
 * it holds once they are MIN_JUDGED_RECORDS or more: a handful of records says nothing about
 * a definition, and a bad record that arrives first must not stop a partition; but judging
 * only a full window let a definition that matched nothing dead-letter and commit every
 * record of a partition smaller than the window.
 *
 * Until then, with a `replica` window (one per replica, the same size and ratio), its
 * records are judged there too, with the records of every other partition whose window is
 * still filling: 200 partitions of 80 records each of a definition that matches nothing
 * would otherwise all be dead-lettered and committed. When the replica-wide window is over
 * its share, a filling partition stops at its own oldest dead letter (a partition without
 * one goes on: nothing of it is bad).
 */
export class DeadLetterWindow {
  readonly #size: number;
  readonly #maxRatio: number;
  readonly #judgeFrom: number;
  readonly #offsets: Float64Array;
  /** 0: a good record; k > 0: a dead letter of kind k - 1. */
  readonly #kinds: Uint8Array;
  readonly #kindOf = new Map<string, number>();
  readonly #causes: { reason: DeadLetterReason; field: string | undefined; detail: string; count: number }[] =
    [];
  #next = 0;
  #filled = 0;
  #deadLetters = 0;
  readonly #replica: DeadLetterWindow | undefined;

  /**
   * Trips when more than `maxRatio` of the last `size` records are dead letters, or while it
   * is filling, when more than that share of `replica`'s are (see above).
   */
  constructor(size: number, maxRatio: number, replica?: DeadLetterWindow) {
    this.#replica = replica;
    this.#size = size;
    this.#maxRatio = maxRatio;
    this.#judgeFrom = Math.min(size, MIN_JUDGED_RECORDS);
    this.#offsets = new Float64Array(size);
    this.#kinds = new Uint8Array(size);
  }

  /**
   * Records a batch (its offsets in order, its dead letters by offset). Returns at the
   * first record that takes the window over its share, or undefined.
   */
  record(
    offsets: readonly number[],
    deadLetters: ReadonlyMap<number, DeadLetterVerdict>,
  ): RatioExceeded | undefined {
    for (const offset of offsets) {
      const verdict = deadLetters.get(offset);
      const filling = this.#filled < this.#judgeFrom;
      if (this.#push(offset, verdict)) return this.#exceeded();
      // Judged replica-wide while it is filling; the replica's numbers are what tripped.
      const replica = this.#replica;
      if (filling && replica !== undefined && replica.#push(offset, verdict) && this.#deadLetters > 0) {
        const wide = replica.#exceeded();
        return { ...wide, firstOffending: this.#exceeded().firstOffending };
      }
    }
    return undefined;
  }

  /** Adds one record; true when the window is judged and over its share. */
  #push(offset: number, verdict: DeadLetterVerdict | undefined): boolean {
    const slot = this.#next;
    if (this.#filled === this.#size) {
      const evicted = this.#kinds[slot]!;
      if (evicted > 0) {
        this.#deadLetters -= 1;
        this.#causes[evicted - 1]!.count -= 1;
      }
    } else {
      this.#filled += 1;
    }
    this.#offsets[slot] = offset;
    this.#kinds[slot] = verdict ? this.#kind(verdict) : 0;
    this.#next = (slot + 1) % this.#size;
    return this.#filled >= this.#judgeFrom && this.#deadLetters > this.#maxRatio * this.#filled;
  }

  #kind(verdict: DeadLetterVerdict): number {
    const key = `${verdict.reason}\u0000${verdict.field ?? ''}`;
    let kind = this.#kindOf.get(key);
    if (kind === undefined) {
      if (this.#causes.length < MAX_KINDS) {
        this.#causes.push({ reason: verdict.reason, field: verdict.field, detail: verdict.detail, count: 0 });
        kind = this.#causes.length;
        this.#kindOf.set(key, kind);
      } else {
        kind = MAX_KINDS;
      }
    }
    this.#causes[kind - 1]!.count += 1;
    this.#deadLetters += 1;
    return kind;
  }

  #exceeded(): RatioExceeded {
    let firstOffending = Number.NaN;
    // A full window's oldest slot is the one after the newest; a filling one's is the first.
    const oldest = this.#filled === this.#size ? this.#next : 0;
    for (let i = 0; i < this.#filled; i++) {
      const slot = (oldest + i) % this.#size;
      if (this.#kinds[slot]! > 0) {
        firstOffending = this.#offsets[slot]!;
        break;
      }
    }
    const common = this.#causes.reduce((a, b) => (b.count > a.count ? b : a));
    return {
      firstOffending,
      deadLetters: this.#deadLetters,
      records: this.#filled,
      common: { ...common },
    };
  }
}
