import type { DiskPressure } from '../common/disk-pressure';
import { DiskFullError } from '../common/errors';
import type { DurableOffset } from '../common/offsets';
import type { OffsetTracker, PartitionCommit } from '../ownership/offset-tracker';
import type { PublicationGate } from '../ownership/publication-gate';
import type { DurableReport } from '../pool/protocol';
import type { StagingPool } from '../pool/staging-pool';
import { listPartIds } from '../staging/part-ids';
import type { IngestionEvents } from './ingestion-events';
import type { OffsetCommitter } from './offset-committer';

/** What the tick works with. */
export interface DurabilityTickDeps {
  readonly intervalMs: number;
  readonly pool: Pick<StagingPool, 'sync' | 'flush'>;
  readonly tracker: Pick<OffsetTracker, 'noteDurable' | 'commitsDue' | 'stillDue'>;
  /** offsets.commitAfter 'published': holds each commit until the parts below it are published. */
  readonly gate: PublicationGate | undefined;
  /** The table's staging directory (the gate's parts). */
  readonly tableDir: string;
  readonly diskPressure: Pick<DiskPressure, 'reportFull' | 'reportWritten'>;
  readonly events: Pick<IngestionEvents, 'syncStarted'>;
  readonly stopping: () => boolean;
  /** A tick that failed otherwise than on a full disk: the replica cannot go on. */
  readonly fail: (error: unknown) => void;
}

/**
 * The durability tick, every durabilityIntervalMs: sync staging, tell the offset
 * tracker what became durable, commit what it then allows (held by the publication
 * gate in 'published' mode), seal the parts that are due. A full staging disk slows
 * the ticks down (and pauses fetching, through the disk pressure) until writes pass.
 */
export class DurabilityTick {
  readonly #deps: DurabilityTickDeps;
  readonly #committer: Pick<OffsetCommitter, 'commit'>;
  #timer: NodeJS.Timeout | undefined;
  #ticking: Promise<void> = Promise.resolve();
  /** Wait before the next tick while staging's disk is full (0: the usual interval). */
  #diskBackoffMs = 0;

  constructor(deps: DurabilityTickDeps, committer: Pick<OffsetCommitter, 'commit'>) {
    this.#deps = deps;
    this.#committer = committer;
  }

  schedule(): void {
    if (this.#deps.stopping()) return;
    this.#timer = setTimeout(() => {
      this.#ticking = this.tick()
        .catch((error: unknown) => this.#deps.fail(error))
        .finally(() => this.schedule());
    }, this.#diskBackoffMs || this.#deps.intervalMs);
  }

  /** No tick starts after this; resolves when the running one (if any) has ended. */
  async stopTicking(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    await this.#ticking;
  }

  /** Staging's disk is full: pause, and retry the writes at growing intervals (up to 5 s). */
  #stagingDiskFull(error: DiskFullError): void {
    const interval = this.#deps.intervalMs;
    this.#diskBackoffMs = Math.min(
      Math.max(5_000, interval),
      Math.max(interval, this.#diskBackoffMs * 2 || 250),
    );
    this.#deps.diskPressure.reportFull('staging', { path: error.path, operation: error.operation });
  }

  /** One durability tick: sync staging, commit what became durable, seal due parts. */
  async tick(): Promise<void> {
    const o = this.#deps;
    const { tracker, gate } = o;
    const endTimer = o.events.syncStarted();
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
