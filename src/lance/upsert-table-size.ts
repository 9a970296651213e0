import type { Logger } from '../common/logger';

/** What this needs of a table: its row count (from its fragments' metadata: no scan). */
interface Counted {
  countRows(): Promise<number>;
}

/**
 * Says when an upsert table grows past a size whose merges need memory beyond the replica's
 * budget. Lance builds an upsert merge's hash join on a scan of the whole table (the key
 * and position columns of every row, delete rows included), so a replica's peak RSS grows
 * with its table, ~0.25 GiB per million rows (docs/design/memory.md, "Not bounded: an
 * upsert table's merge"). An operator sizing a pod for 512 MiB learns it from one log
 * line at 2M rows, and again at each doubling, instead of from an OOM kill.
 *
 * The rows are counted once, then followed by what each merge inserted (updates replace a
 * row, and nothing but a purge removes one): other replicas' merges are not seen, so the
 * count is a floor.
 */
export class UpsertTableSize {
  readonly #table: string;
  readonly #logger: Logger;
  #rows: number | undefined;
  #next = FIRST_WARNING_ROWS;

  constructor(table: string, logger: Logger) {
    this.#table = table;
    this.#logger = logger;
  }

  /** After a merge that inserted `inserted` rows into `table`. */
  async merged(table: Counted, inserted: number): Promise<void> {
    this.#rows = this.#rows === undefined ? await table.countRows() : this.#rows + inserted;
    if (this.#rows < this.#next) return;
    while (this.#next <= this.#rows) this.#next *= 2;
    const gib = 0.6 + (GIB_PER_MILLION_ROWS * this.#rows) / 1_000_000;
    this.#logger.warn(
      {
        event: 'upsert.table.large',
        table: this.#table,
        rows: this.#rows,
        mergeMemoryGiB: Number(gib.toFixed(1)),
      },
      `upsert table ${this.#table} holds ${this.#rows} rows: each merge holds its keys and positions in memory, ` +
        `so give the replica about ${gib.toFixed(1)} GiB (docs/design/memory.md, "Not bounded: an upsert table's merge")`,
    );
  }
}

const FIRST_WARNING_ROWS = 2_000_000;
/** Measured: bench/upserts.md (e2e-upsert, 1M → 10M keys) and bench/upsert-merge-memory.md. */
const GIB_PER_MILLION_ROWS = 0.25;
