import type { Metrics } from '../metrics/metrics';
import type { PartitionCommit } from '../ownership/offset-tracker';

/** What the ingestion counted since its start (the replica's status). */
export interface IngestionCounts {
  readonly consumedRecords: number;
  readonly consumedBytes: number;
  readonly commits: number;
  readonly refusedCommits: number;
  /** Commits kafkajs returned from without sending (its runner was restarting): retried at the next tick. */
  readonly unsentCommits: number;
  readonly joins: number;
}

/**
 * What the ingestion's roles report as it happens, as kafkajs's instrumentation events
 * do: a role never touches prom-client or a counter of the ingestion; the metrics and
 * the counts are fed from these events in one place (IngestionMetrics).
 */
export interface IngestionEvents {
  /** A batch went to staging. */
  consumed(topic: string, records: number, bytes: number): void;
  /** A group join began (its claim follows). */
  joined(): void;
  /** A partition is no longer owned (a join revokes every partition first). */
  released(topic: string, partition: number): void;
  /** A join's claim landed: the partition is owned from its committed `start`. */
  claimed(topic: string, partition: number, start: number): void;
  /** A data commit landed. */
  committed(commits: readonly PartitionCommit[]): void;
  /** A commit kafkajs did not send (its runner was restarting). */
  commitUnsent(): void;
  /** A commit the broker refused (rebalance, stale generation, fenced). */
  commitRefused(): void;
  /** Offsets the broker no longer has (retention, deleteRecords): skipped unconsumed. */
  offsetsLost(topic: string, partition: number, lost: number): void;
  /** How far a partition's position is beyond its log end (0: not beyond). */
  aheadOfLog(topic: string, partition: number, ahead: number): void;
  /** A staging sync starts; the returned function ends it. */
  syncStarted(): () => void;
}

/** Feeds the ingestion's metric families and counts from its roles' events. */
export class IngestionMetrics implements IngestionEvents {
  readonly #metrics: Metrics;
  readonly #counts = {
    consumedRecords: 0,
    consumedBytes: 0,
    commits: 0,
    refusedCommits: 0,
    unsentCommits: 0,
    joins: 0,
  };

  constructor(metrics: Metrics) {
    this.#metrics = metrics;
  }

  get counts(): IngestionCounts {
    return { ...this.#counts };
  }

  consumed(topic: string, records: number, bytes: number): void {
    this.#counts.consumedRecords += records;
    this.#counts.consumedBytes += bytes;
    this.#metrics.consumedRecords.inc({ topic }, records);
    this.#metrics.consumedBytes.inc({ topic }, bytes);
  }

  joined(): void {
    this.#counts.joins += 1;
  }

  released(topic: string, partition: number): void {
    const labels = { topic, partition: String(partition) };
    this.#metrics.committedOffset.remove(labels);
    this.#metrics.consumerLag.remove(labels);
    this.#metrics.offsetsAheadOfLog.remove(labels);
  }

  claimed(topic: string, partition: number, start: number): void {
    const labels = { topic, partition: String(partition) };
    this.#metrics.committedOffset.set(labels, start);
    // A claim starts from the commit anew: a position beyond the log end is the new claim's
    // to find. Both series exist from the claim on (alerts and dashboards see 0, not nothing).
    this.#metrics.offsetsAheadOfLog.set(labels, 0);
    this.#metrics.offsetsLost.inc(labels, 0);
  }

  committed(commits: readonly PartitionCommit[]): void {
    this.#counts.commits += 1;
    for (const c of commits) {
      this.#metrics.committedOffset.set({ topic: c.topic, partition: String(c.partition) }, c.offset);
    }
  }

  commitUnsent(): void {
    this.#counts.unsentCommits += 1;
  }

  commitRefused(): void {
    this.#counts.refusedCommits += 1;
  }

  offsetsLost(topic: string, partition: number, lost: number): void {
    this.#metrics.offsetsLost.inc({ topic, partition: String(partition) }, lost);
  }

  aheadOfLog(topic: string, partition: number, ahead: number): void {
    this.#metrics.offsetsAheadOfLog.set({ topic, partition: String(partition) }, ahead);
  }

  syncStarted(): () => void {
    return this.#metrics.durableSync.startTimer();
  }
}
