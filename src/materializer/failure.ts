import { isDiskFull } from '../common/disk-space';
import { DiskFullError, PartCorruptError } from '../common/errors';
import { LanceSchemaError } from '../lance/lance-errors';
import { SourceMissingError } from './preparation';
import { PublicationMismatchError } from './publication-errors';

/** Why a publication failed, as counted in kafka_lance_publication_failures_total{reason}. */
export type PublicationFailureReason =
  | 'storage'
  | 'disk-full'
  | 'schema-incompatible'
  | 'invalid-column-name'
  | 'part-corrupt'
  | 'source-missing'
  | 'plan-mismatch';

export interface FailureClass {
  readonly reason: PublicationFailureReason;
  /** The same plan will fail the same way however often it is retried. */
  readonly permanent: boolean;
  /** Facts for the log and the quarantine's reason file (column, types, path). */
  readonly context: Readonly<Record<string, unknown>>;
  /** Longest wait between retries (default: the policy's); short where the cause can pass at any moment. */
  readonly retryCapMs?: number;
}

/** A full disk is retried at least this often, so that a publication resumes soon after space returns. */
export const DISK_FULL_RETRY_CAP_MS = 5_000;

/**
 * Transient (storage, I/O, a commit conflict that outlived its retries, anything not
 * known): retried with backoff. Permanent (the data does not fit the table, a part is
 * unreadable or gone): set aside after a bounded number of attempts. Unknown errors
 * count as transient: setting data aside on a guess would be worse than retrying.
 */
export function classifyFailure(error: unknown): FailureClass {
  // First: a full disk can surface inside any other failure (an unreadable part read
  // while the ledger could not be written), and it must never set good data aside.
  if (isDiskFull(error)) {
    const diskFull = findDiskFull(error);
    return {
      reason: 'disk-full',
      permanent: false,
      context: diskFull ? { ...diskFull.context } : {},
      retryCapMs: DISK_FULL_RETRY_CAP_MS,
    };
  }
  if (error instanceof LanceSchemaError) {
    return {
      reason: error.problem === 'invalid-column-name' ? 'invalid-column-name' : 'schema-incompatible',
      permanent: true,
      context: error.context,
    };
  }
  if (error instanceof PartCorruptError)
    return { reason: 'part-corrupt', permanent: true, context: error.context };
  if (error instanceof SourceMissingError)
    return { reason: 'source-missing', permanent: true, context: error.context };
  if (error instanceof PublicationMismatchError)
    return { reason: 'plan-mismatch', permanent: true, context: error.context };
  return { reason: 'storage', permanent: false, context: {} };
}

/** The DiskFullError in an error's cause chain (undefined for a bare ENOSPC errno error). */
export function findDiskFull(error: unknown): DiskFullError | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 8; depth++) {
    if (e instanceof DiskFullError) return e;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Reasons whose plan's rows are readable and only refused by the table: they go to the dead-letter file too. */
export const SCHEMA_REASONS: ReadonlySet<string> = new Set<PublicationFailureReason>([
  'schema-incompatible',
  'invalid-column-name',
]);

export type FailureVerdict =
  | { readonly action: 'retry'; readonly attempts: number; readonly retryInMs: number }
  | { readonly action: 'quarantine'; readonly attempts: number };

/**
 * Per plan: how often it failed and when it may run again. A failed plan waits
 * (exponential backoff, 0.5 s doubling up to 30 s) while the others go on; after
 * `maxPermanent` permanent failures it is set aside. The count lives in memory:
 * a restart grants a plan a fresh, still bounded, number of attempts.
 */
export class FailurePolicy {
  readonly #plans = new Map<string, { attempts: number; permanent: number; nextAt: number }>();

  constructor(
    readonly maxPermanent: number,
    readonly baseMs = 500,
    readonly maxMs = 30_000,
  ) {
    if (!Number.isSafeInteger(maxPermanent) || maxPermanent < 1)
      throw new RangeError(`maxPermanentFailures: ${maxPermanent}`);
  }

  /** The plan failed before and its backoff has not run out. */
  waiting(planId: string, now: number): boolean {
    const p = this.#plans.get(planId);
    return p !== undefined && now < p.nextAt;
  }

  get retrying(): number {
    return this.#plans.size;
  }

  failed(planId: string, failure: FailureClass, now: number): FailureVerdict {
    const p = this.#plans.get(planId) ?? { attempts: 0, permanent: 0, nextAt: 0 };
    p.attempts += 1;
    if (failure.permanent) p.permanent += 1;
    this.#plans.set(planId, p);
    if (failure.permanent && p.permanent >= this.maxPermanent)
      return { action: 'quarantine', attempts: p.attempts };
    const retryInMs = Math.min(failure.retryCapMs ?? this.maxMs, this.baseMs * 2 ** (p.attempts - 1));
    p.nextAt = now + retryInMs;
    return { action: 'retry', attempts: p.attempts, retryInMs };
  }

  /** Setting a plan aside failed (disk): try again after the backoff. */
  postpone(planId: string, now: number): void {
    const p = this.#plans.get(planId) ?? { attempts: 1, permanent: 0, nextAt: 0 };
    p.nextAt = now + Math.min(this.maxMs, this.baseMs * 2 ** (p.attempts - 1));
    this.#plans.set(planId, p);
  }

  done(planId: string): void {
    this.#plans.delete(planId);
  }
}
