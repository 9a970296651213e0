import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import { TableRefusedError } from '../lance/table-opening';
import { PartialPublicationError } from './publication-errors';

/**
 * Why a table publishes nothing now: `refused` (its existing Lance table refuses the
 * definition: a declared type, its mode), `failing` (opening it or its last turn threw:
 * the store, the disk), `damaged` (a publication found half or twice in its Lance table:
 * an operator must look, nothing is retried), `retrying` (plans of it wait for a retry
 * after failed attempts; not an alert).
 */
export type StallReason = 'refused' | 'failing' | 'damaged' | 'retrying';

/** The stall reasons that need someone (kafka_lance_table_stalled = 1); `retrying` resolves itself. */
export function alertsOn(reason: StallReason | undefined): boolean {
  return reason === 'refused' || reason === 'failing' || reason === 'damaged';
}

/** The longest a failing table waits before its next try (a refused one waits this long between checks). */
const MAX_BACKOFF_MS = 30_000;
const MIN_BACKOFF_MS = 500;

/**
 * One table's stall: why it publishes nothing now, and when it is tried again. A table
 * that fails backs off alone (doubling, up to MAX_BACKOFF_MS; a refused one at once to
 * it) and says so in one log line (event `table.stalled`), and once again when it
 * publishes again (`table.resumed`): a change of reason is a line, a repeat is not.
 */
export class TableStall {
  #reason: StallReason | undefined;
  #backoffMs = 0;
  #retryAt = 0;
  readonly #logger: Logger;

  constructor(
    readonly table: string,
    logger: Logger,
  ) {
    this.#logger = logger;
  }

  get reason(): StallReason | undefined {
    return this.#reason;
  }

  /** No turn before this (epoch ms); never, once damaged. */
  get retryAt(): number {
    return this.#retryAt;
  }

  /** Opening the table or its turn threw: it backs off, refused or failing. */
  failed(error: unknown, now: number): void {
    const refused = error instanceof TableRefusedError;
    this.#backoffMs = refused
      ? MAX_BACKOFF_MS
      : Math.min(MAX_BACKOFF_MS, Math.max(MIN_BACKOFF_MS, this.#backoffMs * 2));
    this.#retryAt = now + this.#backoffMs;
    this.#mark(refused ? 'refused' : 'failing', error);
  }

  /** A publication found half or twice in the table: it stops until an operator repairs it and restarts. */
  damaged(error: PartialPublicationError): void {
    this.#retryAt = Number.POSITIVE_INFINITY;
    this.#mark('damaged', error);
  }

  /** A turn ran through: the backoff starts over; `retrying` while plans of it wait for their retry. */
  served(retrying: boolean): void {
    this.#backoffMs = 0;
    this.#mark(retrying ? 'retrying' : undefined);
  }

  /** Nothing waits in the table (its parts moved away, or all published): not stalled. */
  idle(): void {
    this.#mark(undefined);
  }

  #mark(stalled: StallReason | undefined, error?: unknown): void {
    if (this.#reason === stalled) return;
    const was = this.#reason;
    this.#reason = stalled;
    const table = this.table;
    if (stalled === undefined) {
      this.#logger.info({ event: 'table.resumed', table, was }, `table ${table} publishes again`);
      return;
    }
    const facts = {
      event: 'table.stalled',
      table,
      reason: stalled,
      ...(error instanceof TableRefusedError ? { fields: error.problems.map((p) => p.field) } : {}),
      ...(error instanceof PartialPublicationError ? { publication: error.context['planId'] } : {}),
      ...(error !== undefined ? { err: errorMessage(error) } : {}),
      ...(stalled === 'refused' || stalled === 'failing' ? { retryInMs: this.#backoffMs } : {}),
    };
    const what = {
      refused: 'its Lance table refuses the definition',
      failing: 'it failed',
      damaged: `a publication is found half or twice in its Lance table; an operator must repair it, then restart`,
      retrying: 'plans of it wait for a retry',
    }[stalled];
    this.#logger[stalled === 'retrying' ? 'warn' : 'error'](
      facts,
      `table ${table} is stalled (${what}): its plans wait, the other tables go on`,
    );
  }
}
