/**
 * Many tables beside one: the same N log records (bench/lib/records.ts) consumed by one
 * replica into one table, and spread over T topics (3 partitions each) that one replica
 * subscribes to by pattern and writes into T tables (`table: '{topic}'`). For each arm:
 * MiB/s and records/s from its group join to its last row visible, CPU s/GiB, and peak
 * RSS of the replica's process tree; the ratio many ÷ one; and, in the many-tables arm, how
 * long a record produced into a quiet extra table (one record, while the others drain
 * their backlog) took to become visible (it must not wait for the backlog).
 *
 *   npm run build && node dist/bench/many-tables.js [--records 1000000] [--tables 200] [--out bench]
 *
 * Brokers: KAFKA_BOOTSTRAP_SERVERS, else a local broker (deploy/kafka-local) started and stopped here.
 */
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { Partitioners } from 'kafkajs';
import { benchArgs } from './args';
import { ensureBroker, kafkaClient, topicRecords } from './lib/kafka';
import { benchRecord } from './lib/records';
import { renderProfiles, summarizeProfiles } from './lib/cpu-profile';
import { withSection } from './lib/report-sections';
import { startReplica, stopReplica, type Replica } from './lib/replica-arm';
import { ensureTopicsServed } from '../src/kafka/protocol/topic-ready';
import { scrape, sumOf } from '../src/harness/prometheus-text';

const args = benchArgs();
const RECORDS = Number(args.get('records') ?? 1_000_000);
const TABLES = Number(args.get('tables') ?? 200);
const OUT = args.get('out');
/** Profiles the many-tables arm's replica (`--cpu-prof`, every thread) into this directory and prints where its CPU went. */
const PROFILE = args.get('profile');
/** `--node-args '--heapsnapshot-signal=SIGUSR2'`: node options of the many-tables arm's replica. */
/** Writes the many-tables arm's replica log lines (JSON) to this file. */
const LOG = args.get('log');
const PARTITIONS = 3;
const MiB = 1024 * 1024;
const log = (line: string) => console.log(`[many-tables] ${line}`);

interface ArmFigures {
  readonly arm: string;
  readonly tables: number;
  readonly rows: number;
  readonly seconds: number;
  readonly mibPerSecond: number;
  readonly recordsPerSecond: number;
  readonly cpuSeconds: number;
  readonly cpuPerGiB: number;
  readonly peakRssMiB: number;
  readonly otherCoresBusy: number;
  /** Seconds from producing one record into a quiet table to it being visible (many-tables arm). */
  readonly quietTableSeconds?: number;
  /** Lance publications made, and their summed duration (the replica's metrics). */
  readonly publications?: number;
  readonly publicationSeconds?: number;
  /** CPU seconds per thread of the replica (staging workers, materializer, Lance's runtime, …). */
  readonly threadCpu: Record<string, number>;
  /** At the highest RSS seen by the poll: anonymous and file-backed MiB, and the main thread's V8 heap and external MiB. */
  readonly atPeak?: Record<string, number>;
}

/**
 * A scrape of the replica's metrics is taken at most this often: rendering them with 200
 * table labels took 1.56 s of the replica's main thread in a profiled run when scraped at
 * every poll of the loop below (each 0.5 s after a count of every table), a cost the
 * one-table arm hardly pays and a Prometheus scraping every 15–30 s would not make.
 */
const SCRAPE_EVERY_MS = 10_000;

/**
 * The replica's RSS split (kernel) and, when `withHeap`, its main thread's heap (its
 * metrics), in MiB.
 */
async function memoryNow(
  pid: number,
  port: number | undefined,
  withHeap: boolean,
): Promise<Record<string, number>> {
  const status = await fsp.readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kib = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0) / 1024;
  const out: Record<string, number> = { rss: kib('VmRSS'), anon: kib('RssAnon'), file: kib('RssFile') };
  const metrics = port === undefined || !withHeap ? undefined : await scrape(port).catch(() => undefined);
  if (metrics) {
    out.heapUsed = sumOf(metrics, 'nodejs_heap_size_used_bytes') / MiB;
    out.heapTotal = sumOf(metrics, 'nodejs_heap_size_total_bytes') / MiB;
    out.external = sumOf(metrics, 'nodejs_external_memory_bytes') / MiB;
  }
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, Math.round(v)]));
}

/** Produces `perTopic` records into each topic (round robin over its partitions), unless it already holds them. */
async function produceInto(
  brokers: readonly string[],
  topics: readonly string[],
  perTopic: number,
  partitions: number,
): Promise<number> {
  const kafka = kafkaClient(brokers);
  const admin = kafka.admin();
  await admin.connect();
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  let bytes = 0;
  let n = 0;
  try {
    for (const topic of topics) {
      const have = await topicRecords(admin, topic);
      const sample = Buffer.byteLength(benchRecord(0));
      if (have === perTopic) {
        bytes += sample * perTopic;
        continue;
      }
      if (have !== undefined)
        throw new Error(`${topic} holds ${have} records, not ${perTopic}: delete it first`);
      await ensureTopicsServed(admin, [{ topic, numPartitions: partitions }]);
      for (let sent = 0; sent < perTopic;) {
        const messages = [];
        for (let i = 0; i < 2_500 && sent < perTopic; i++, sent++, n++) {
          const value = benchRecord(n);
          bytes += Buffer.byteLength(value);
          messages.push({ value, partition: sent % partitions });
        }
        await producer.send({ topic, acks: -1, messages });
      }
    }
  } finally {
    await producer.disconnect();
    await admin.disconnect();
  }
  return bytes;
}

async function visibleRows(uri: string, tables: readonly string[]): Promise<number> {
  const db = await lancedb.connect(uri, { readConsistencyInterval: 0 });
  try {
    const names = new Set(await db.tableNames());
    let rows = 0;
    for (const t of tables) {
      if (!names.has(t)) continue;
      const table = await db.openTable(t);
      rows += await table.countRows();
      table.close();
    }
    return rows;
  } catch {
    return -1;
  } finally {
    db.close();
  }
}

async function runArm(
  arm: string,
  brokers: readonly string[],
  definition: Record<string, unknown>,
  tables: readonly string[],
  rows: number,
  bytes: number,
  quiet?: { topic: string; produce: () => Promise<void> },
  profileDir?: string,
  logFile?: string,
): Promise<ArmFigures> {
  log(`${arm}: starting one replica`);
  const nodeArgs = [
    ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []),
    ...(quiet && args.has('node-args') ? args.get('node-args')!.split(' ') : []),
  ];
  const lines: string[] = [];
  const replica: Replica = await startReplica(
    arm,
    'unused',
    brokers,
    definition,
    nodeArgs,
    {},
    logFile ? (line) => lines.push(JSON.stringify(line)) : undefined,
  );
  let quietSeconds: number | undefined;
  let quietAt: number | undefined;
  let quietWatch: Promise<void> | undefined;
  let atPeak: Record<string, number> | undefined;
  try {
    const deadline = Date.now() + 30 * 60_000;
    let last = 0;
    let lastScrape = 0;
    for (;;) {
      if (replica.exited) throw new Error(`${arm}: the replica exited early`);
      const visible = await visibleRows(replica.lanceUri, tables);
      if (visible >= rows) break;
      const scraping = Date.now() - lastScrape >= SCRAPE_EVERY_MS;
      if (scraping) lastScrape = Date.now();
      const memory = await memoryNow(replica.process.pid, replica.port, scraping);
      if (memory.rss! > (atPeak?.rss ?? 0)) atPeak = memory;
      // Halfway through the backlog, one record into a table nobody else writes.
      if (quiet && quietAt === undefined && visible >= rows / 2) {
        await quiet.produce();
        const at = (quietAt = performance.now());
        // Watched on its own every 250 ms: this loop's count of every table takes seconds.
        quietWatch = (async () => {
          while (!replica.exited) {
            if ((await visibleRows(replica.lanceUri, [quiet.topic])) > 0) {
              quietSeconds = (performance.now() - at) / 1000;
              return;
            }
            await new Promise((r) => setTimeout(r, 250));
          }
        })();
      }
      if (Date.now() - last > 10_000) {
        log(
          `${arm}: ${visible}/${rows} rows visible, RSS ${(replica.sampler.peakRssBytes / MiB).toFixed(0)} MiB peak`,
        );
        last = Date.now();
      }
      if (Date.now() > deadline) throw new Error(`${arm}: ${visible}/${rows} rows after 30 min`);
      await new Promise((r) => setTimeout(r, 500));
    }
    const end = replica.sampler.elapsed();
    const seconds = end - (replica.joinedAt ?? 0);
    const cpu = replica.sampler.cpuSeconds();
    const metrics =
      replica.port === undefined ? undefined : await scrape(replica.port).catch(() => undefined);
    const threadCpu = Object.fromEntries(
      Object.entries(await replica.sampler.threadCpu())
        .filter(([, s]) => s >= 0.5)
        .map(([name, s]) => [name, round(s)]),
    );
    await quietWatch;
    return {
      arm,
      tables: tables.length,
      rows,
      seconds: round(seconds),
      mibPerSecond: round(bytes / MiB / seconds),
      recordsPerSecond: Math.round(rows / seconds),
      cpuSeconds: round(cpu),
      cpuPerGiB: round(cpu / (bytes / 2 ** 30)),
      peakRssMiB: Math.round(replica.sampler.peakRssBytes / MiB),
      otherCoresBusy: round(await replica.sampler.otherCores()),
      ...(quietSeconds !== undefined ? { quietTableSeconds: round(quietSeconds) } : {}),
      ...(metrics
        ? {
            publications: sumOf(metrics, 'kafka_lance_publications_total'),
            publicationSeconds: round(sumOf(metrics, 'kafka_lance_publication_duration_seconds_sum')),
          }
        : {}),
      threadCpu,
      ...(atPeak ? { atPeak } : {}),
    };
  } finally {
    const code = await stopReplica(replica);
    if (code !== 0) log(`${arm}: the replica exited ${code} on stop`);
    await fsp.rm(replica.work, { recursive: true, force: true }).catch(() => undefined);
    if (logFile) await fsp.writeFile(logFile, lines.join('\n') + '\n');
  }
}

const round = (n: number) => Math.round(n * 100) / 100;

async function main(): Promise<void> {
  const broker = ensureBroker(log);
  try {
    const perTopic = Math.floor(RECORDS / TABLES);
    const rows = perTopic * TABLES;
    const prefix = `bench-many-${TABLES}x${perTopic}-t`;
    const manyTopics = Array.from({ length: TABLES }, (_, i) => `${prefix}${String(i).padStart(3, '0')}`);
    const oneTopic = `bench-many-one-${rows}`;
    log(`producing ${rows} records: ${TABLES} topics × ${perTopic}, and one topic of ${rows}`);
    const manyBytes = await produceInto(broker.brokers, manyTopics, perTopic, PARTITIONS);
    const oneBytes = await produceInto(broker.brokers, [oneTopic], rows, PARTITIONS * 2);
    const quietTopic = `bench-many-quiet-${Date.now().toString(36)}`;
    const admin = kafkaClient(broker.brokers).admin();
    await admin.connect();
    await ensureTopicsServed(admin, [{ topic: quietTopic, numPartitions: 1 }]);
    await admin.disconnect();
    const one = await runArm(
      'one-table',
      broker.brokers,
      { topics: [oneTopic], table: 'logs' },
      ['logs'],
      rows,
      oneBytes,
    );
    const many = await runArm(
      'many-tables',
      broker.brokers,
      {
        topics: [{ pattern: `^(${prefix}\\d+|${quietTopic})$` }],
        table: '{topic}',
      },
      manyTopics,
      rows,
      manyBytes,
      {
        topic: quietTopic,
        produce: async () => {
          const p = kafkaClient(broker.brokers).producer({
            createPartitioner: Partitioners.DefaultPartitioner,
          });
          await p.connect();
          await p.send({ topic: quietTopic, acks: -1, messages: [{ value: benchRecord(0) }] });
          await p.disconnect();
        },
      },
      PROFILE,
      LOG,
    );
    if (PROFILE) console.log(renderProfiles(await summarizeProfiles(PROFILE)).join('\n'));
    const ratio = round(many.mibPerSecond / one.mibPerSecond);
    const lines = [
      '## Many tables beside one',
      '',
      `Generated by \`node dist/bench/many-tables.js --records ${RECORDS} --tables ${TABLES}\` on ${new Date().toISOString()} ` +
        `(${os.cpus().length} cores, Node ${process.version}, broker on the same machine). ` +
        `The same ${rows.toLocaleString('en-US')} log records of ~800 bytes: one topic of ${PARTITIONS * 2} partitions into one table, ` +
        `and ${TABLES} topics of ${PARTITIONS} partitions (a pattern subscription, \`table: '{topic}'\`) into ${TABLES} tables; one replica each, defaults.`,
      '',
      '| arm | tables | MiB/s | records/s | timed s | CPU s | CPU s / GiB | peak RSS MiB | other cores busy |',
      '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
      ...[one, many].map(
        (a) =>
          `| ${a.arm} | ${a.tables} | ${a.mibPerSecond} | ${a.recordsPerSecond.toLocaleString('en-US')} | ${a.seconds} | ${a.cpuSeconds} | ${a.cpuPerGiB} | ${a.peakRssMiB} | ${a.otherCoresBusy} |`,
      ),
      '',
      `- many ÷ one throughput: **${ratio}** (target ≥ 0.7): ${ratio >= 0.7 ? 'PASS' : 'FAIL'}`,
      // On a shared machine the arms can meet different loads: CPU per GiB is what the ratio follows when the replica is CPU-bound.
      `- CPU per GiB, one ÷ many: ${round(one.cpuPerGiB / many.cpuPerGiB)} (other cores busy ${one.otherCoresBusy} during one-table, ${many.otherCoresBusy} during many-tables: a throughput ratio measured under different loads is read with this one)`,
      `- many-tables peak RSS ${many.peakRssMiB} MiB (target ≤ 512): ${many.peakRssMiB <= 512 ? 'PASS' : 'FAIL'}`,
      `- a quiet table's one record, produced halfway through the backlog, was visible after ${many.quietTableSeconds ?? '?'} s`,
      ...[one, many].map(
        (a) =>
          `- ${a.arm}: ${a.publications ?? '?'} publications (${a.publicationSeconds ?? '?'} s summed); CPU s per thread (whole run): ` +
          Object.entries(a.threadCpu)
            .sort(([, x], [, y]) => y - x)
            .map(([name, s]) => `${name} ${s}`)
            .join(', ') +
          `; at the highest RSS polled (MiB; heap when scraped, every 10 s): ${JSON.stringify(a.atPeak ?? {})}`,
      ),
      '',
    ];
    const text = lines.join('\n');
    console.log(text);
    if (OUT) {
      await fsp.writeFile(path.join(OUT, 'many-tables.md'), `# kafka-lance bench: many tables\n\n${text}`);
      await fsp.writeFile(path.join(OUT, 'many-tables.json'), JSON.stringify({ one, many, ratio }, null, 2));
      // The same table in the bench's main report, where the other arms are.
      const report = path.join(OUT, 'report.md');
      const previous = await fsp.readFile(report, 'utf8').catch(() => '# kafka-lance bench report\n');
      await fsp.writeFile(report, withSection(previous, 'many-tables', text));
    }
  } finally {
    broker.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
