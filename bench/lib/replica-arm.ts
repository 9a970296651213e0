/**
 * The kafka-lance arms: one replica (`bin/kafka-lance run`, defaults but for the
 * settings named in `extra`) on the bench topic, timed from spawn and from its group
 * join until every row is visible in its Lance table; and the freshness phase, where a
 * producer writes at a fixed rate while a replica runs and a poller records when each
 * row becomes visible.
 */
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { produce } from '../../src/cli/produce';
import { roundAll } from './child-arm';
import { ProcessTreeSampler, threadTaggedEnv } from './proc-sampler';
import { scrape, sumOf, type Sample } from '../../src/harness/prometheus-text';
import { benchConsumer, RECORD_BYTES } from './records';
import { MiB, round, type ArmResult } from './result';
import { ensureTopicsServed } from '../../src/kafka/protocol/topic-ready';
import { ReplicaProcess } from '../../src/harness/replica-process';

export interface Replica {
  readonly process: ReplicaProcess;
  readonly sampler: ProcessTreeSampler;
  readonly work: string;
  readonly lanceUri: string;
  /** The object store's options when `extra.lance.uri` names one. */
  readonly storageOptions: Record<string, string> | undefined;
  readonly tagDir: string;
  port: number | undefined;
  joinedAt: number | undefined;
  exited: boolean;
  readonly exit: Promise<number | null>;
}

/**
 * One replica on the bench topic, in a work directory of its own. `extra` goes over the
 * bench definition: `lance: { uri, storageOptions }` puts its table on an object store,
 * `name` shares a group (and table) between replicas.
 */
export async function startReplica(
  name: string,
  topic: string,
  brokers: readonly string[],
  extra: Record<string, unknown>,
  nodeArgs: readonly string[] = [],
  env: NodeJS.ProcessEnv = {},
  /** Every log line of the replica, parsed (a bench that keeps them). */
  onLine?: (line: Record<string, unknown>) => void,
): Promise<Replica> {
  const work = await fsp.mkdtemp(path.join(os.tmpdir(), `kl-bench-${name}-`));
  const tagDir = path.join(work, 'threads');
  await fsp.mkdir(tagDir);
  const file = path.join(work, 'consumer.json');
  await fsp.writeFile(
    file,
    JSON.stringify(benchConsumer(`${name}-${Date.now()}`, topic, path.join(work, 'dlq.jsonl'), extra)),
  );
  const lance = extra.lance as { uri?: string; storageOptions?: Record<string, string> } | undefined;
  const replicaProcess = new ReplicaProcess(
    file,
    path.join(work, 'data'),
    brokers,
    { ...threadTaggedEnv(tagDir), ...env },
    {
      nodeArgs,
      // Log lines arrive only after this function has built the replica they update.
      onLine: (line) => {
        if (line.event === 'metrics.listening') replica.port = line.port as number;
        if (line.event === 'kafka.join') replica.joinedAt ??= replica.sampler.elapsed();
        if (line.level >= 50) process.stderr.write(`  replica: ${JSON.stringify(line)}\n`);
        onLine?.(line);
      },
    },
  );
  const sampler = new ProcessTreeSampler(replicaProcess.pid, tagDir).start();
  const replica: Replica = {
    process: replicaProcess,
    sampler,
    work,
    lanceUri: lance?.uri ?? path.join(work, 'data', 'lance'),
    storageOptions: lance?.storageOptions,
    tagDir,
    port: undefined,
    joinedAt: undefined,
    exited: false,
    exit: replicaProcess.exited.then((e) => e.code),
  };
  void replica.exit.then(() => (replica.exited = true));
  return replica;
}

export async function stopReplica(r: Replica): Promise<number | null> {
  const { code } = await r.process.stop(60_000);
  r.sampler.stop();
  return code;
}

export async function openTable(
  uri: string,
  storageOptions?: Record<string, string>,
): Promise<lancedb.Table | undefined> {
  try {
    const db = await lancedb.connect(uri, {
      readConsistencyInterval: 0,
      ...(storageOptions ? { storageOptions } : {}),
    });
    return (await db.tableNames()).includes('logs') ? await db.openTable('logs') : undefined;
  } catch {
    return undefined;
  }
}

/** Rows of the table, and how many distinct (partition, offset) pairs they hold. */
export async function verifyTable(
  uri: string,
  storageOptions?: Record<string, string>,
): Promise<{ rows: number; distinct: number }> {
  const table = await openTable(uri, storageOptions);
  if (!table) return { rows: 0, distinct: 0 };
  const keys = new Set<number>();
  let rows = 0;
  for await (const batch of table.query().select(['_partition', '_offset'])) {
    const p = batch.getChild('_partition')!;
    const o = batch.getChild('_offset')!;
    for (let i = 0; i < batch.numRows; i++) keys.add(Number(p.get(i)) * 2 ** 40 + Number(o.get(i)));
    rows += batch.numRows;
  }
  table.close();
  return { rows, distinct: keys.size };
}

/** Seconds per stage from the replica's /metrics (sums of histograms, totals of counters). */
export function stageBreakdown(m: readonly Sample[]): Record<string, number> {
  const s = (name: string, match: Record<string, string> = {}) => round(sumOf(m, name, match), 2);
  return {
    durableSyncSeconds: s('kafka_lance_durable_sync_seconds_sum'),
    durableSyncs: s('kafka_lance_durable_sync_seconds_count'),
    publicationPrepareSeconds: s('kafka_lance_publication_duration_seconds_sum', { phase: 'prepare' }),
    publicationWriteSeconds: s('kafka_lance_publication_duration_seconds_sum', { phase: 'write' }),
    publications: s('kafka_lance_publications_total', { result: 'success' }),
    publicationFailures: s('kafka_lance_publications_total', { result: 'failure' }),
    sourceWaitSeconds: s('kafka_lance_source_wait_seconds_sum'),
    fetchPermitWaitSeconds: s('kafka_lance_permit_wait_seconds_sum', { kind: 'fetch' }),
    decodePermitWaitSeconds: s('kafka_lance_permit_wait_seconds_sum', { kind: 'decode' }),
    consumedMiB: round(sumOf(m, 'kafka_lance_consumed_bytes_total') / MiB),
    stagedMiB: round(sumOf(m, 'kafka_lance_staged_bytes_total') / MiB),
    publishedMiB: round(sumOf(m, 'kafka_lance_published_bytes_total') / MiB),
    deadLetters: s('kafka_lance_dead_letter_records_total'),
    mainHeapUsedMiB: round(sumOf(m, 'nodejs_heap_size_used_bytes') / MiB),
    mainExternalMiB: round(sumOf(m, 'nodejs_external_memory_bytes') / MiB),
  };
}

export interface ReplicaArmOptions {
  readonly id: string;
  readonly label: string;
  readonly topic: string;
  readonly records: number;
  readonly bytes: number;
  readonly brokers: readonly string[];
  /** Settings on top of the defaults (e.g. materializer.pipelinePreparation). */
  readonly extra: Record<string, unknown>;
  readonly stallSeconds?: number;
  /** More node flags for the replica (the profile arm's `--cpu-prof`, which NODE_OPTIONS refuses). */
  readonly nodeArgs?: readonly string[];
  /** More environment for the replica (a before → after arm's KAFKA_LANCE_NATIVE_JSON=off). */
  readonly env?: NodeJS.ProcessEnv;
}

export async function runReplicaArm(o: ReplicaArmOptions, log: (line: string) => void): Promise<ArmResult> {
  const r = await startReplica(o.id, o.topic, o.brokers, o.extra, o.nodeArgs, o.env);
  const { sampler } = r;
  const phases: Record<string, number> = {};
  const mark = (name: string) => (phases[name] ??= round(sampler.elapsed(), 2));
  const problems: string[] = [];
  let doneAt: number | undefined;
  let lastChange = sampler.elapsed();
  let lastVisible = -1;
  let lastConsumed = -1;
  let table: lancedb.Table | undefined;
  let lastMetrics: Sample[] = [];
  // The CPU charged is from the last poll that saw no record consumed to the poll that saw
  // the last row: the replica's start-up and the graceful stop are not its cost per GiB.
  let cpuBefore = 0;
  let threadsBefore: Record<string, number> = {};
  while (doneAt === undefined) {
    await new Promise((res) => setTimeout(res, 500));
    if (r.exited) {
      problems.push(`the replica exited with code ${await r.exit} before every row was visible`);
      break;
    }
    if (r.port === undefined) continue;
    mark('metricsUp');
    if (r.joinedAt !== undefined) phases.joined ??= round(r.joinedAt, 2);
    const m = await scrape(r.port).catch(() => undefined);
    if (!m) continue;
    lastMetrics = m;
    const consumed = sumOf(m, 'kafka_lance_consumed_records_total');
    const published = sumOf(m, 'kafka_lance_published_records_total');
    // Visible rows come from Lance itself: the published counter is reported by the
    // materializer worker once per cycle (runOnce), which can span many publications.
    table ??= await openTable(r.lanceUri, r.storageOptions);
    const visible = table ? await table.countRows().catch(() => 0) : 0;
    sampler.rows = visible;
    sampler.consumed = consumed;
    if (consumed === 0) {
      await sampler.sampleOnce();
      cpuBefore = sampler.cpuSeconds();
      threadsBefore = await sampler.threadCpu();
    }
    if (consumed > 0) mark('firstConsumed');
    if (consumed >= o.records) mark('allConsumed');
    if (published > 0) mark('firstPublishedMetric');
    if (visible > 0) mark('firstVisible');
    if (visible !== lastVisible || consumed !== lastConsumed) {
      lastVisible = visible;
      lastConsumed = consumed;
      lastChange = sampler.elapsed();
    }
    if (visible >= o.records) doneAt = mark('allVisible');
    if (sampler.elapsed() - lastChange > (o.stallSeconds ?? 120)) {
      problems.push(
        `stalled: ${visible} of ${o.records} rows visible, ${consumed} consumed, no change for ${o.stallSeconds ?? 120} s`,
      );
      break;
    }
  }
  table?.close();
  if (r.port !== undefined) lastMetrics = (await scrape(r.port).catch(() => undefined)) ?? lastMetrics;
  await sampler.sampleOnce();
  const threadCpu = Object.fromEntries(
    Object.entries(await sampler.threadCpu()).map(([t, cpu]) => [t, cpu - (threadsBefore[t] ?? 0)]),
  );
  const processCpuSeconds = sampler.cpuSeconds();
  const cpuSeconds = processCpuSeconds - cpuBefore;
  const otherCores = await sampler.otherCores();
  const code = await stopReplica(r);
  if (code !== 0 && problems.length === 0) problems.push(`graceful stop exited with code ${code}`);
  const check = await verifyTable(r.lanceUri, r.storageOptions);
  if (check.rows !== o.records) problems.push(`its table holds ${check.rows} rows, expected ${o.records}`);
  if (check.distinct !== check.rows)
    problems.push(`${check.rows - check.distinct} duplicate (partition, offset) rows`);
  log(`  ${o.id}: verified ${check.rows} rows, ${check.distinct} distinct offsets`);
  await fsp.rm(r.work, { recursive: true, force: true });
  const start = r.joinedAt ?? 0;
  const end = doneAt ?? sampler.elapsed();
  const seconds = Math.max(end - start, 1e-3);
  const rows = Math.min(Math.max(lastVisible, 0), o.records);
  const bytes = (o.bytes * rows) / o.records;
  return {
    id: o.id,
    label: o.label,
    expectedRows: o.records,
    rows,
    verifiedRows: check.rows,
    problems,
    bytes,
    seconds: round(seconds, 2),
    wallSeconds: round(end, 2),
    mibPerSecond: round(bytes / MiB / seconds),
    recordsPerSecond: Math.round(rows / seconds),
    peakRssMiB: Math.round(sampler.peakRssBytes / MiB),
    otherCores: round(otherCores, 2),
    cpuSeconds: round(cpuSeconds, 2),
    processCpuSeconds: round(processCpuSeconds, 2),
    threadCpuSeconds: roundAll(threadCpu),
    series: sampler.samples.map((s) => ({
      t: round(s.t, 2),
      rssMiB: Math.round(s.rssBytes / MiB),
      rows: s.rows,
      ...(s.consumed !== undefined ? { consumed: s.consumed } : {}),
    })),
    startedAt: round(start, 2),
    detail: { settings: JSON.stringify(o.extra) },
    phases,
    stages: stageBreakdown(lastMetrics),
  };
}

export interface Freshness {
  readonly rate: number;
  readonly seconds: number;
  readonly rows: number;
  readonly visibleRows: number;
  readonly pollMs: number;
  readonly p50Seconds: number;
  readonly p99Seconds: number;
  readonly maxSeconds: number;
  readonly peakRssMiB: number;
  readonly problems: string[];
}

/**
 * Freshness at a steady rate: a replica (buffered, defaults) runs on an empty topic
 * while the `produce` load generator writes `rate` records/s for `seconds`; every
 * `pollMs` the poller reads the rows that became visible since the last poll (per
 * partition, offsets above the last seen) and records, per row, the time it was seen
 * minus its Kafka timestamp (the producer's create time, same clock).
 */
export async function measureFreshness(
  brokers: readonly string[],
  partitions: number,
  rate: number,
  seconds: number,
  log: (line: string) => void,
  extra: Record<string, unknown> = {},
): Promise<Freshness> {
  const topic = `bench-fresh-${Date.now()}`;
  const admin = (await import('./kafka')).kafkaClient(brokers).admin();
  await admin.connect();
  await ensureTopicsServed(admin, [{ topic, numPartitions: partitions }]);
  const r = await startReplica('fresh', topic, brokers, extra);
  const problems: string[] = [];
  const pollMs = 250;
  for (let waited = 0; r.joinedAt === undefined && waited < 60_000; waited += 100) {
    await new Promise((res) => setTimeout(res, 100));
  }
  const count = Math.round(rate * seconds);
  log(`  freshness: producing ${count} records at ${rate}/s`);
  const producing = produce({
    brokers,
    topic,
    rate,
    count,
    recordBytes: RECORD_BYTES,
    badRatio: 0,
    partitions,
  });
  const seen = new Map<number, number>();
  const lags: number[] = [];
  let table: lancedb.Table | undefined;
  const deadline = Date.now() + (seconds + 90) * 1000;
  while (lags.length < count && Date.now() < deadline && !r.exited) {
    await new Promise((res) => setTimeout(res, pollMs));
    table ??= await openTable(r.lanceUri, r.storageOptions);
    if (!table) continue;
    const where = Array.from({ length: partitions }, (_, p) =>
      seen.has(p) ? `(_partition = ${p} AND _offset > ${seen.get(p)})` : `_partition = ${p}`,
    ).join(' OR ');
    const now = Date.now();
    for await (const batch of table.query().where(where).select(['_partition', '_offset', '_timestamp'])) {
      const p = batch.getChild('_partition')!;
      const o = batch.getChild('_offset')!;
      const ts = batch.getChild('_timestamp')!;
      for (let i = 0; i < batch.numRows; i++) {
        const part = Number(p.get(i));
        seen.set(part, Math.max(seen.get(part) ?? -1, Number(o.get(i))));
        lags.push((now - Number(ts.get(i))) / 1000);
      }
    }
  }
  await producing.catch((e: unknown) => problems.push(`producer failed: ${String(e)}`));
  table?.close();
  await r.sampler.sampleOnce();
  const peak = r.sampler.peakRssBytes;
  await stopReplica(r);
  await fsp.rm(r.work, { recursive: true, force: true });
  await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
  await admin.disconnect();
  if (lags.length !== count) problems.push(`${lags.length} of ${count} rows became visible`);
  lags.sort((a, b) => a - b);
  const q = (f: number) => round(lags[Math.min(lags.length - 1, Math.floor(f * lags.length))] ?? NaN, 2);
  return {
    rate,
    seconds,
    rows: count,
    visibleRows: lags.length,
    pollMs,
    p50Seconds: q(0.5),
    p99Seconds: q(0.99),
    maxSeconds: round(lags[lags.length - 1] ?? NaN, 2),
    peakRssMiB: Math.round(peak / MiB),
    problems,
  };
}
