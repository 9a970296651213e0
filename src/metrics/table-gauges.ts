/** What the gauges take of an index round's report (lance/index-keeper.ts's IndexReport). */
export interface IndexGaugeReport {
  readonly index: string;
  readonly unindexedRows: number;
  readonly seconds: number | undefined;
}

/** A table's gauges as last reported. */
export interface TableGaugeValues {
  /** Sealed parts waiting (a table not open: those counted in its staging directory). */
  readonly sealedParts: number;
  /** 1 while it needs someone (failing, refused, damaged); `retrying` resolves itself and is 0. */
  readonly stalled: number;
}

interface IndexGaugeValues {
  readonly unindexedRows: number;
  readonly seconds?: number;
}

/**
 * Every table's last gauges, combined per label value: tables beyond the label bound share
 * `_other`, whose gauges must describe all of them, not the last one reported. Amounts add
 * (sealed parts, unindexed rows); states and durations take the worst (stalled, seconds).
 */
export class TableGauges {
  readonly #tables = new Map<string, TableGaugeValues>();
  /** table → index → its last report. */
  readonly #indexes = new Map<string, Map<string, IndexGaugeValues>>();

  set(table: string, values: TableGaugeValues): void {
    this.#tables.set(table, values);
  }

  setIndexes(table: string, reports: readonly IndexGaugeReport[]): void {
    const byIndex = this.#indexes.get(table) ?? new Map<string, IndexGaugeValues>();
    for (const r of reports)
      byIndex.set(r.index, {
        unindexedRows: r.unindexedRows,
        ...(r.seconds !== undefined ? { seconds: r.seconds } : {}),
      });
    this.#indexes.set(table, byIndex);
  }

  /** Label value → its tables' gauges combined. */
  perLabel(labelOf: (table: string) => string): Map<string, TableGaugeValues> {
    const out = new Map<string, TableGaugeValues>();
    for (const [t, g] of this.#tables) {
      const label = labelOf(t);
      const sum = out.get(label);
      out.set(label, {
        sealedParts: (sum?.sealedParts ?? 0) + g.sealedParts,
        stalled: Math.max(sum?.stalled ?? 0, g.stalled),
      });
    }
    return out;
  }

  /** Label value → index → unindexed rows summed and the longest update's seconds, over its tables. */
  indexesPerLabel(labelOf: (table: string) => string): Map<string, Map<string, IndexGaugeValues>> {
    const out = new Map<string, Map<string, IndexGaugeValues>>();
    for (const [t, byIndex] of this.#indexes) {
      const label = labelOf(t);
      const combined = out.get(label) ?? new Map<string, IndexGaugeValues>();
      for (const [index, v] of byIndex) {
        const was = combined.get(index);
        const seconds = [was?.seconds, v.seconds].filter((s): s is number => s !== undefined);
        combined.set(index, {
          unindexedRows: (was?.unindexedRows ?? 0) + v.unindexedRows,
          ...(seconds.length > 0 ? { seconds: Math.max(...seconds) } : {}),
        });
      }
      out.set(label, combined);
    }
    return out;
  }
}
