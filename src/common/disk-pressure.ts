import { freeBytes } from './disk-space';
import type { DiskStage } from './errors';
import type { Logger } from './logger';

/** `kafka_lance_disk_full{stage}`: 1 while that stage's disk is full (fed here, kept by metrics/). */
export interface DiskFullGauge {
  set(labels: { stage: DiskStage }, value: number): void;
}

/** Where a write met a full disk. */
export interface DiskFullReport {
  readonly path: string;
  readonly operation: string;
}

/**
 * Which of the replica's file systems are full right now, as one
 * state for the whole process: staging reports its own failed ticks, the materializer
 * its failed publications. While any stage is full, consumption is paused (the
 * listener, kafka/ingestion.ts); when every stage has written again, it resumes.
 * Each episode is one `disk.full` event (path, operation, free bytes) and one
 * `disk.space-returned`, and `kafka_lance_disk_full{stage}` is 1 meanwhile.
 */
export class DiskPressure {
  readonly #full = new Map<DiskStage, DiskFullReport & { since: number }>();
  readonly #listeners: Array<(full: boolean) => void> = [];

  constructor(
    private readonly logger: Logger,
    private readonly diskFull: DiskFullGauge,
  ) {
    for (const stage of ['staging', 'lance'] as const) diskFull.set({ stage }, 0);
  }

  get full(): boolean {
    return this.#full.size > 0;
  }

  isFull(stage: DiskStage): boolean {
    return this.#full.has(stage);
  }

  /** Called with true when the first stage fills up, false when the last one has space again. */
  onChange(listener: (full: boolean) => void): void {
    this.#listeners.push(listener);
  }

  /** A write of `stage` met ENOSPC/EDQUOT (again). Logs only the first of an episode. */
  reportFull(stage: DiskStage, report: DiskFullReport): void {
    if (this.#full.has(stage)) return;
    const wasFull = this.full;
    this.#full.set(stage, { ...report, since: Date.now() });
    this.diskFull.set({ stage }, 1);
    void freeBytes(report.path).then((free) =>
      this.logger.error(
        {
          event: 'disk.full',
          stage,
          path: report.path,
          operation: report.operation,
          freeBytes: free ?? null,
        },
        `${stage} disk full: consumption paused until space returns (retrying with backoff)`,
      ),
    );
    if (!wasFull) for (const l of this.#listeners) l(true);
  }

  /** A write of `stage` succeeded: its episode (if any) is over. */
  reportWritten(stage: DiskStage): void {
    const episode = this.#full.get(stage);
    if (!episode) return;
    this.#full.delete(stage);
    this.diskFull.set({ stage }, 0);
    void freeBytes(episode.path).then((free) =>
      this.logger.info(
        {
          event: 'disk.space-returned',
          stage,
          path: episode.path,
          pausedMs: Date.now() - episode.since,
          freeBytes: free ?? null,
        },
        `${stage} disk has space again`,
      ),
    );
    if (!this.full) for (const l of this.#listeners) l(false);
  }
}
