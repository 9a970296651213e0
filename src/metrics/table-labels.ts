import type { Logger } from '../common/logger';

/** The `table` label value of every table beyond the bound (metrics.maxTableLabels). */
export const OTHER_TABLES = '_other';

/**
 * The bound on distinct `table` label values: a pattern subscription routed per topic can
 * make thousands of tables, and each of them a dozen series per family. The first
 * `max` tables seen keep their own name; every later one is counted under `_other`, and
 * the first time that happens is one warning naming the table and the option.
 */
export class TableLabels {
  readonly #named = new Set<string>();
  #max: number;
  #logger: Logger | undefined;
  #warned = false;

  constructor(max: number) {
    this.#max = max;
  }

  /** The bound and where its one warning goes (the replica's definition: metrics.maxTableLabels). */
  configure(max: number, logger: Logger): void {
    this.#max = max;
    this.#logger = logger;
  }

  /** The label value of `table`: its name while the bound allows it, `_other` beyond it. */
  of(table: string): string {
    if (this.#named.has(table)) return table;
    if (this.#named.size < this.#max) {
      this.#named.add(table);
      return table;
    }
    if (!this.#warned) {
      this.#warned = true;
      this.#logger?.warn(
        { event: 'metrics.tables.bounded', table, maxTableLabels: this.#max },
        `more than ${this.#max} tables: the metrics of table ${table} and of every later table are reported as table="${OTHER_TABLES}" (raise metrics.maxTableLabels to name them)`,
      );
    }
    return OTHER_TABLES;
  }
}
