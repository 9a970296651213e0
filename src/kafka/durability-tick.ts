import { DiskFullError } from '../common/errors';
import type { DurableOffset } from '../common/offsets';
import type { PartitionCommit } from '../ownership/offset-tracker';
import type { DurableReport } from '../pool/protocol';
import { listPartIds } from '../staging/part-ids';
import type { IngestionState } from './ingestion-state';
import type { OffsetCommitter } from './offset-committer';

/**
 * The durability tick, every durabilityIntervalMs: sync staging, tell the offset
 * tracker what became durable, commit what it then allows (held by the publication
 * gate in 'published' mode), seal the parts that are due. A full staging disk slows
 * the ticks down (and pauses fetching, through the disk pressure) until writes pass.
 */
export class DurabilityTick {
  readonly #state: IngestionState;
  readonly #committer: OffsetCommitter;
  #timer: NodeJS.Timeout | undefined;
  #ticking: Promise<void> = Promise.resolve();
  /** Wait before the next tick while staging's disk is full (0: the usual interval). */
  #diskBackoffMs = 0;

  constructor(state: IngestionState, committer: OffsetCommitter) {
    this.#state = state;
    this.#committer = committer;
  }

  schedule(): void {
    if (this.#state.stopping) return;
    this.#timer = setTimeout(() => {
      this.#ticking = this.tick()
        .catch((error: unknown) => this.#state.fail(error))
        .finally(() => this.schedule());
    }, this.#diskBackoffMs || this.#state.options.consumer.durabilityIntervalMs);
  }

  /** No tick starts after this; resolves when the running one (if any) has ended. */
  async stopTicking(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    await this.#ticking;
  }

  /** Staging's disk is full: pause, and retry the writes at growing intervals (up to 5 s). */
  #stagingDiskFull(error: DiskFullError): void {
    const interval = this.#state.options.consumer.durabilityIntervalMs;
    this.#diskBackoffMs = Math.min(
      Math.max(5_000, interval),
      Math.max(interval, this.#diskBackoffMs * 2 || 250),
    );
    this.#state.options.diskPressure.reportFull('staging', { path: error.path, operation: error.operation });
  }

  /** One durability tick: sync staging, commit what became durable, seal due parts. */
  async tick(): Promise<void> {
    const { options: o, tracker, gate } = this.#state;
    const endTimer = o.metrics.durableSync.startTimer();
    let reports: readonly DurableReport[];
    try {
      reports = await o.pool.sync();
    } catch (error) {
      // Nothing new is durable this tick: nothing is committed, the writers keep their bytes.
      if (error instanceof DiskFullError) return this.#stagingDiskFull(error);
      throw error;
    }
    endTimer();
    for (const { epoch, offsets } of reports) {
      for (const [topic, partition, offset] of offsets) {
        tracker.noteDurable(topic, partition, offset as DurableOffset, epoch);
      }
    }
    let commits: PartitionCommit[];
    if (gate) {
      // After the sync replies: a part they report unsealed may be renamed during the listing.
      const present = new Set(reports.flatMap((r) => r.unsealed));
      for (const id of await listPartIds(o.tableDir)) present.add(id);
      // Decided after the listing: a join during it closes and reopens the gate, and the
      // old epoch's commits must not enter the new epoch's gate (the tracker dropped them).
      commits = tracker.stillDue(gate.tick(tracker.commitsDue(), present));
    } else {
      commits = tracker.commitsDue();
    }
    await this.#committer.commit(commits);
    try {
      await o.pool.flush(false);
    } catch (error) {
      if (error instanceof DiskFullError) return this.#stagingDiskFull(error);
      throw error;
    }
    this.#diskBackoffMs = 0;
    o.diskPressure.reportWritten('staging');
  }
}
