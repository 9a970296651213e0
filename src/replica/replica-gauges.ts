import type { Admin } from 'kafkajs';
import type { Ingestion } from '../kafka/ingestion';
import type { Metrics } from '../metrics/metrics';
import type { StagingPool } from '../pool/staging-pool';

/**
 * Topics whose log ends are read per second for the lag gauge. A topic's read is two
 * requests (kafkajs reads both ends): with 200 routed topics, reading every topic every
 * second took ~160 ms of the main thread a pass and 400 requests a second of the broker.
 * Beyond this many topics each topic's lag is refreshed every topics / this seconds.
 */
export const LAG_TOPICS_PER_SECOND = 10;

/**
 * Gauges read off the running stages every second: the staging queue and parts, and
 * the consumer lag of each owned partition (which needs the log end from the broker;
 * one read at a time, at most LAG_TOPICS_PER_SECOND topics, in turn). Returns the
 * timer, cleared at stop.
 */
export function startReplicaGauges(
  pool: StagingPool,
  ingestion: Ingestion,
  admin: Admin,
  metrics: Metrics,
  table: string,
): NodeJS.Timeout {
  let lagInFlight = false;
  const turns = new LagTurns();
  const timer = setInterval(() => {
    const q = pool.queue();
    metrics.queueDepth.set({ queue: 'staging' }, q.records);
    metrics.queueCapacity.set({ queue: 'staging' }, q.maxRecords);
    metrics.queueDepth.set({ queue: 'staging_bytes' }, q.bytes);
    metrics.queueCapacity.set({ queue: 'staging_bytes' }, q.maxBytes);
    metrics.stagingParts.set({ table, state: 'open' }, pool.parts.open);
    metrics.stagingParts.set({ table, state: 'sealing' }, pool.parts.sealing);
    if (lagInFlight) return;
    lagInFlight = true;
    void updateLag(admin, ingestion, metrics, turns)
      .catch(() => undefined)
      .finally(() => (lagInFlight = false));
  }, 1_000);
  timer.unref();
  return timer;
}

/** Which owned topics' lag the next tick reads: the next ones in name order after the last read. */
export class LagTurns {
  #last: string | undefined;

  next(topics: Iterable<string>, count = LAG_TOPICS_PER_SECOND): string[] {
    const sorted = [...new Set(topics)].sort();
    if (sorted.length <= count) return sorted;
    const from = this.#last === undefined ? 0 : sorted.findIndex((t) => t > this.#last!);
    const start = from < 0 ? 0 : from;
    const picked = Array.from({ length: count }, (_, i) => sorted[(start + i) % sorted.length]!);
    this.#last = picked[picked.length - 1];
    return picked;
  }
}

async function updateLag(
  admin: Admin,
  ingestion: Ingestion,
  metrics: Metrics,
  turns: LagTurns,
): Promise<void> {
  const owned = ingestion.owned();
  for (const topic of turns.next(owned.map((o) => o.topic))) {
    const ends = await admin.fetchTopicOffsets(topic);
    for (const o of owned.filter((x) => x.topic === topic)) {
      const end = ends.find((e) => e.partition === o.partition);
      if (end)
        metrics.consumerLag.set(
          { topic, partition: String(o.partition) },
          Math.max(0, Number(end.high) - o.landed),
        );
    }
  }
}
