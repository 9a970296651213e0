import { z } from 'zod';

/** Distinct `table` label values by default: the dashboard stays readable, Prometheus's series bounded. */
export const DEFAULT_MAX_TABLE_LABELS = 100;

/** What the replica's metrics report. */
export const metricsOptions = z
  .strictObject({
    /**
     * Distinct tables named in the `table` label of every per-table metric; the metrics of
     * tables beyond it are reported as `table="_other"` (one warning says which came first).
     */
    maxTableLabels: z.number().int().min(1).max(100_000).default(DEFAULT_MAX_TABLE_LABELS),
  })
  .prefault({});
