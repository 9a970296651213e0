import type { DiskStage } from '../common/errors';
import { findDiskFull, type PublicationFailureReason } from './failure';
import type { PublicationResult } from './publisher';

/** Where a publication met a full disk: the Lance table, or the staging directory (ledger, plans). */
export interface DiskFullState {
  readonly stage: DiskStage;
  readonly path: string;
  readonly operation: string;
}

export function diskFullState(error: unknown): DiskFullState {
  const typed = findDiskFull(error);
  if (typed) return { stage: typed.stage, path: typed.path, operation: typed.operation };
  // A bare errno error: the materializer writes nothing but the ledger outside Lance.
  const e = error as { path?: unknown; syscall?: unknown };
  const text = (v: unknown, otherwise: string) => (typeof v === 'string' ? v : otherwise);
  return { stage: 'staging', path: text(e.path, ''), operation: text(e.syscall, 'write') };
}

/** Counts that only grow: publications, failures, parts set aside, dead-lettered rows. */
export interface PublicationCounts {
  readonly publications: number;
  readonly failedPublications: number;
  readonly publishedRows: number;
  readonly publishedBytes: number;
  /** Failed publication attempts by reason (failedPublications is their sum). */
  readonly failures: Readonly<Partial<Record<PublicationFailureReason, number>>>;
  /** Parts moved to the staging quarantine, by reason. */
  readonly quarantinedParts: Readonly<Partial<Record<PublicationFailureReason, number>>>;
  /** Rows of set-aside publications written to the dead-letter file, by topic. */
  readonly deadLetteredRows: Readonly<Record<string, number>>;
}

export interface MaterializerStats extends PublicationCounts {
  readonly waitingParts: number;
  readonly unresolvableParts: number;
  /** Plans in the ledger waiting for a retry after a failure. */
  readonly retryingPlans: number;
  /** Set while the last publication attempt met a full disk (cleared by the next success). */
  readonly diskFull?: DiskFullState;
  readonly permits: {
    kind: 'fetch' | 'decode';
    inUse: number;
    capacity: number;
    waitSecondsTotal: number;
    waits: number;
  }[];
  readonly reservation: { bytes: number; limit: number; waitSecondsTotal: number };
  readonly last: PublicationResult | undefined;
  /**
   * What the counts grew by since the previous stats() call (drained by it): the host adds
   * these to its Prometheus counters as they are, with no copy of the totals to diff against.
   */
  readonly counted: PublicationCounts;
  /** Publications and permit waits since the previous stats() call (drained by it). */
  readonly recent: readonly PublicationResult[];
  readonly recentPermitWaits: readonly { kind: 'fetch' | 'decode'; seconds: readonly number[] }[];
}

/** A mutable tally of PublicationCounts. */
class Tally {
  publications = 0;
  failedPublications = 0;
  publishedRows = 0;
  publishedBytes = 0;
  failures: Partial<Record<PublicationFailureReason, number>> = {};
  quarantinedParts: Partial<Record<PublicationFailureReason, number>> = {};
  deadLetteredRows: Record<string, number> = {};

  snapshot(): PublicationCounts {
    return {
      publications: this.publications,
      failedPublications: this.failedPublications,
      publishedRows: this.publishedRows,
      publishedBytes: this.publishedBytes,
      failures: { ...this.failures },
      quarantinedParts: { ...this.quarantinedParts },
      deadLetteredRows: { ...this.deadLetteredRows },
    };
  }
}

function bump<K extends string>(counts: Partial<Record<K, number>>, key: K, n: number): void {
  counts[key] = (counts[key] ?? 0) + n;
}

/**
 * The materializer's counts, kept twice: as totals (its own stats, the tests) and as the
 * growth since the last report (the host's counters), so that nothing downstream diffs.
 */
export class PublicationCounters {
  readonly #total = new Tally();
  #since = new Tally();
  #last: PublicationResult | undefined;
  #recent: PublicationResult[] = [];
  #diskFull: DiskFullState | undefined;

  published(result: PublicationResult): void {
    for (const t of [this.#total, this.#since]) {
      t.publications += 1;
      t.publishedRows += result.rows;
      t.publishedBytes += result.bytes;
    }
    this.#last = result;
    if (this.#recent.length < 10_000) this.#recent.push(result);
  }

  /** A publication attempt ended without a failure: a full disk met before is gone. */
  succeeded(): void {
    this.#diskFull = undefined;
  }

  failed(reason: PublicationFailureReason, error: unknown): void {
    for (const t of [this.#total, this.#since]) {
      t.failedPublications += 1;
      bump(t.failures, reason, 1);
    }
    if (reason === 'disk-full') this.#diskFull = diskFullState(error);
  }

  quarantined(reason: PublicationFailureReason, parts: number): void {
    for (const t of [this.#total, this.#since]) bump(t.quarantinedParts, reason, parts);
  }

  deadLettered(topic: string, rows: number): void {
    for (const t of [this.#total, this.#since]) bump(t.deadLetteredRows, topic, rows);
  }

  /** The totals, the growth since the previous report and the recent publications; drains the last two. */
  report(): Pick<MaterializerStats, keyof PublicationCounts | 'counted' | 'recent' | 'last' | 'diskFull'> {
    const counted = this.#since.snapshot();
    this.#since = new Tally();
    const recent = this.#recent;
    this.#recent = [];
    return {
      ...this.#total.snapshot(),
      counted,
      recent,
      last: this.#last,
      ...(this.#diskFull ? { diskFull: this.#diskFull } : {}),
    };
  }
}
