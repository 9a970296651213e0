import type { Admin } from 'kafkajs';
import type { Ingestion } from '../kafka/ingestion';
import type { Metrics } from '../metrics/metrics';
import type { StagingPool } from '../pool/staging-pool';

/**
 * Gauges read off the running stages every second: the staging queue and parts, and
 * the consumer lag of each owned partition (which needs the log end from the broker;
 * one read at a time). Returns the timer, cleared at stop.
 */
export function startReplicaGauges(
  pool: StagingPool,
  ingestion: Ingestion,
  admin: Admin,
  metrics: Metrics,
  table: string,
): NodeJS.Timeout {
  let lagInFlight = false;
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
    void updateLag(admin, ingestion, metrics)
      .catch(() => undefined)
      .finally(() => (lagInFlight = false));
  }, 1_000);
  timer.unref();
  return timer;
}

async function updateLag(admin: Admin, ingestion: Ingestion, metrics: Metrics): Promise<void> {
  const owned = ingestion.owned();
  for (const topic of new Set(owned.map((o) => o.topic))) {
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
