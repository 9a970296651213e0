import type { Metrics } from '../metrics/metrics';
import type { OffsetTracker } from '../ownership/offset-tracker';
import type { BatchDone } from '../pool/protocol';

/**
 * Staging's report of each batch it staged (the pool's onBatchDone): counted, and its
 * dead letters held in the offset tracker until they are delivered. Made before the
 * staging pool and the ingestion, which shares the tracker, so the pool reports to an
 * object that exists when it starts.
 */
export class StagedBatchReports {
  readonly #tracker: OffsetTracker;
  readonly #metrics: Metrics;
  readonly #table: { readonly table: string };

  constructor(tracker: OffsetTracker, metrics: Metrics, table: string) {
    this.#tracker = tracker;
    this.#metrics = metrics;
    this.#table = { table };
  }

  /** The batches' DLQ results (pool hook): registered synchronously, before a sync covering them. */
  onBatchDone(topic: string, partition: number, result: BatchDone): void {
    if (result.byTable) {
      // A routed lane: each table under its own label (bounded by metrics.maxTableLabels), not the template's.
      for (const t of result.byTable) {
        const label = { table: this.#metrics.tableLabels.of(t.table) };
        this.#metrics.stagedRecords.inc(label, t.staged);
        this.#metrics.stagedBytes.inc(label, t.stagedBytes);
      }
    } else {
      this.#metrics.stagedRecords.inc(this.#table, result.staged);
      this.#metrics.stagedBytes.inc(this.#table, result.stagedBytes);
    }
    if (result.deadLetters.length > 0) {
      this.#tracker.holdOffsets(
        topic,
        partition,
        result.deadLetters.map((d) => d.offset),
      );
    }
  }
}
