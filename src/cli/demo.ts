import { spawnSync } from 'node:child_process';
import { withMallocTuning } from '../common/malloc-tuning';
import { mkdirSync, readFileSync } from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { brokersFromEnv, loadConsumer, type ResolvedConsumer } from '../config';
import { OFFSET_COLUMN, PARTITION_COLUMN, TOPIC_COLUMN } from '../staging/system-columns';
import { DLQ, TOPIC, publishedInRanges, summarize, type RunRanges } from './demo-summary';
import { closeDemoBroker, demoKafka } from './demo-broker';
import { CliError, TableMissingError } from './errors';
import { ensureTopicsServed } from '../kafka/protocol/topic-ready';
import { ReplicaProcess, ReplicaProcessError } from '../harness/replica-process';
import { connectAdmin, topicEnds, type PartitionEnds } from './kafka-admin';
import { openExistingTable, quote } from './lance-read';
import { badCount } from './log-records';
import { KAFKA_LOCAL, ROOT } from './paths';
import { produce } from './produce';

export interface DemoOptions {
  readonly seconds: number;
  readonly rate: number;
  readonly dataDir: string;
  /** Level of the replica's JSON logs (they go to a file under the data dir). */
  readonly logLevel: string;
  /** A summary line (stdout). */
  readonly print: (line: string) => void;
  /** The progress line: replaces the previous one on a terminal; `final` is the last one, always shown. */
  readonly progress: (line: string, final?: boolean) => void;
}

export const CONSUMER = path.join(ROOT, 'consumers/app-logs.ts');
export const PARTITIONS = 6;
/** One line in 200 is broken on purpose, to show the dead-letter topic at work. */
export const BAD_RATIO = 0.005;
const SETTLE_TIMEOUT_MS = 120_000;

/** What one log demo runs: its consumer, topics and producer; the rest of the run is shared. */
export interface DemoVariant {
  readonly consumerFile: string;
  readonly topic: string;
  readonly dlq: string;
  /** The log file's name starts with it. */
  readonly label: string;
  /** Produces `count` records at `rate` a second, BAD_RATIO of them broken on purpose. */
  produce(o: {
    readonly brokers: readonly string[];
    readonly count: number;
    readonly rate: number;
    readonly onSent: (produced: number) => void;
  }): Promise<void>;
  /** Lines after the shared summary, and the problems that fail the run (read from the table). */
  report?(consumer: ResolvedConsumer, ranges: RunRanges): Promise<{ lines: string[]; problems: string[] }>;
}

/** The JSON log demo: consumers/app-logs.ts. */
export const JSON_LOGS: DemoVariant = {
  consumerFile: CONSUMER,
  topic: TOPIC,
  dlq: DLQ,
  label: 'demo',
  produce: async (o) => {
    await produce({
      brokers: o.brokers,
      topic: TOPIC,
      rate: o.rate,
      count: o.count,
      recordBytes: 0,
      badRatio: BAD_RATIO,
      partitions: PARTITIONS,
      onSent: o.onSent,
    });
  },
};

/**
 * The demo: an embedded broker unless brokers are configured, one replica of the
 * app-logs consumer as a child process (`kafka-lance run`, its JSON logs into a file
 * under the data dir), a producer of realistic logs, a progress line, and a summary
 * read back from the Lance table. The numbers must add up, or the demo fails.
 */
export async function runDemo(o: DemoOptions, variant: DemoVariant = JSON_LOGS): Promise<void> {
  const { topic, dlq } = variant;
  const dataDir = path.resolve(o.dataDir);
  const logFile = path.join(
    dataDir,
    'logs',
    `${variant.label}-${new Date().toISOString().replace(/[-:]/g, '').slice(0, 15)}.log`,
  );
  mkdirSync(path.dirname(logFile), { recursive: true });
  o.print(`Logs of this run: ${logFile}`);
  const embedded = startEmbeddedBrokerIfNeeded(o);
  const brokers = embedded.brokers;
  const started = Date.now();
  const kafka = demoKafka('kafka-lance-demo', brokers);
  const admin = await connectAdmin(kafka, brokers);
  let replica: ReplicaProcess | undefined;
  try {
    await ensureTopicsServed(admin, [
      { topic, numPartitions: PARTITIONS },
      { topic: dlq, numPartitions: 1 },
    ]);
    const startEnds = (await topicEnds(admin, topic))!;
    const dlqStart = sumHigh(await topicEnds(admin, dlq));
    const consumer = loadConsumer(variant.consumerFile, process.env, { brokers, dataDir });
    await refuseForeignTable(consumer, topic, startEnds);

    const port = await freePort();
    replica = startReplica(brokers, dataDir, port, o.logLevel, logFile, variant.consumerFile);
    await waitReady(replica, logFile);

    const count = o.seconds * o.rate;
    let produced = 0;
    const line = async () => {
      const m = await scrape(port);
      return (
        `${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s  produced ${produced}/${count}  ` +
        `staged ${m.staged}  published ${m.published}  dead letters ${m.dead}  lag ${m.lag}`
      );
    };
    const ticker = progressTicker(line, (l) => o.progress(l));
    let ranges: RunRanges = new Map();
    try {
      await variant.produce({ brokers, count, rate: o.rate, onSent: (n) => (produced = n) });
      const endEnds = (await topicEnds(admin, topic))!;
      ranges = new Map(
        endEnds.map((e) => [
          e.partition,
          { from: startEnds.find((s) => s.partition === e.partition)?.high ?? 0, to: e.high },
        ]),
      );
      // Parts seal after a few seconds; wait until every record of the run is published or dead-lettered.
      const deadline = Date.now() + SETTLE_TIMEOUT_MS;
      let settled = { published: 0, dead: 0 };
      for (;;) {
        settled = {
          published: await publishedInRanges(consumer, ranges, topic),
          dead: sumHigh(await topicEnds(admin, dlq)) - dlqStart,
        };
        if (settled.published + settled.dead >= produced || Date.now() > deadline || !replica.alive) break;
        await new Promise((r) => setTimeout(r, 1_000));
      }
      ticker.stop();
      o.progress(
        `${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s  produced ${produced}/${count}  ` +
          `in Lance ${settled.published}  dead letters ${settled.dead}`,
        true,
      );
    } finally {
      ticker.stop();
    }
    const stopped = await stopReplica(replica);
    replica = undefined;
    o.print('');
    await summarize(o.print, {
      consumer,
      topic,
      dlq,
      report: variant.report && (() => variant.report!(consumer, ranges)),
      produced,
      broken: badCount(produced, BAD_RATIO),
      dead: sumHigh(await topicEnds(admin, dlq)) - dlqStart,
      ranges,
      seconds: (Date.now() - started) / 1000,
      logFile,
      replicaExit: stopped,
    });
  } finally {
    if (replica) await stopReplica(replica);
    await closeDemoBroker(admin, embedded, o.print);
  }
}

export function startEmbeddedBrokerIfNeeded(o: Pick<DemoOptions, 'print'>): {
  brokers: string[];
  started: boolean;
} {
  const configured = brokersFromEnv();
  if (configured) return { brokers: configured, started: false };
  o.print(
    'No KAFKA_BOOTSTRAP_SERVERS: starting the embedded Kafka broker (first run fetches its jars with Maven)…',
  );
  const status = spawnSync(KAFKA_LOCAL, ['status'], { encoding: 'utf8' });
  const start = spawnSync(KAFKA_LOCAL, ['start'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (start.status !== 0) {
    throw new CliError(
      'BROKER_UNREACHABLE',
      `the embedded broker did not start:\n${start.stdout}${start.stderr}\nIt needs Java 17+ and Maven; or point the demo at a running broker with KAFKA_BOOTSTRAP_SERVERS=host:port.`,
    );
  }
  o.print(start.stdout.trim());
  return { brokers: [`127.0.0.1:${process.env.KAFKA_LOCAL_PORT ?? 9092}`], started: status.status !== 0 };
}

/**
 * A data dir left by a run against another broker holds rows at offsets this broker's
 * log has not reached yet: this run's rows would collide with them. Refuse up front.
 */
async function refuseForeignTable(
  consumer: ResolvedConsumer,
  topic: string,
  ends: readonly PartitionEnds[],
): Promise<void> {
  const opened = await openExistingTable(consumer).catch((error: unknown) => {
    if (error instanceof TableMissingError) return undefined;
    throw error;
  });
  if (!opened) return;
  try {
    const ahead = await opened.table.countRows(
      `${TOPIC_COLUMN} = ${quote(topic)} AND (${ends.map((e) => `(${PARTITION_COLUMN} = ${e.partition} AND ${OFFSET_COLUMN} >= ${e.high})`).join(' OR ')})`,
    );
    if (ahead > 0) {
      throw new CliError(
        'DEMO_MISMATCH',
        `${consumer.dataDir} holds ${ahead} rows at offsets that ${topic} on this broker has not reached: it was filled from another broker. Use a fresh --data-dir (or delete this one).`,
      );
    }
  } finally {
    opened.close();
  }
}

/** One replica as `kafka-lance run` in a child: its JSON logs (and its workers') go to the file, not the terminal. */
export function startReplica(
  brokers: readonly string[],
  dataDir: string,
  port: number,
  level: string,
  logFile: string,
  consumerFile: string = CONSUMER,
): ReplicaProcess {
  return new ReplicaProcess(consumerFile, dataDir, brokers, withMallocTuning(), {
    logLevel: level,
    metricsPort: port,
    logFile,
    parseLogs: false,
  });
}

export async function waitReady(replica: ReplicaProcess, logFile: string): Promise<void> {
  try {
    await replica.waitReady(90_000);
  } catch (error) {
    if (!(error instanceof ReplicaProcessError)) throw error;
    throw new CliError('REPLICA_FAILED', `${error.message}; its log: ${logFile}\n${tail(logFile)}`);
  }
}

/** SIGTERM: the replica stops fetching, flushes, commits and finishes its publication, then exits 0. */
export async function stopReplica(replica: ReplicaProcess): Promise<number | null> {
  return (await replica.stop(60_000)).code;
}

export function tail(file: string, lines = 10): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export const sumHigh = (ends: readonly PartitionEnds[] | undefined): number =>
  (ends ?? []).reduce((n, e) => n + e.high, 0);

/** Sums of the replica's counters from its /metrics page (Prometheus text format). */
export async function scrape(
  port: number,
): Promise<{ staged: number; published: number; dead: number; lag: number }> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const sum = (name: string) =>
    text
      .split('\n')
      .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
      .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  return {
    staged: sum('kafka_lance_staged_records_total'),
    published: sum('kafka_lance_published_records_total'),
    dead: sum('kafka_lance_dead_letter_records_total'),
    lag: sum('kafka_lance_consumer_lag'),
  };
}

/**
 * Prints `line()` through `progress` every second until stopped. A line still being
 * computed (a scrape in flight) when the run settles is never printed after the final one.
 */
export function progressTicker(
  line: () => Promise<string>,
  progress: (line: string) => void,
): { stop(): void } {
  let stopped = false;
  const timer = setInterval(
    () =>
      void line().then(
        (l) => stopped || progress(l),
        () => undefined,
      ),
    1_000,
  );
  return {
    stop: () => {
      stopped = true;
      clearInterval(timer);
    },
  };
}

/** A demo's terminal output: the progress line rewritten in place on a terminal, one line every 5 s elsewhere (CI, a pipe). */
export function terminalOutput(): Pick<DemoOptions, 'print' | 'progress'> {
  const tty = process.stdout.isTTY;
  let lastProgress = 0;
  return {
    print: (line) => {
      if (tty && lastProgress > 0) process.stdout.write('\n');
      lastProgress = 0;
      console.log(line);
    },
    progress: (line, final) => {
      if (tty) {
        process.stdout.write(`\r\x1b[K${line}`);
        lastProgress = 1;
      } else if (final || Date.now() - lastProgress >= 5_000) {
        console.log(line);
        lastProgress = Date.now();
      }
    },
  };
}
