import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { Kafka, Partitioners, logLevel } from 'kafkajs';
import type { Logger } from '../common/logger';
import { brokersFromEnv } from '../config';
import type { Metrics } from '../metrics/metrics';
import { Replica } from '../replica';

export interface DemoOptions {
  readonly seconds: number;
  readonly rate: number;
  readonly dataDir: string;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly print: (line: string) => void;
}

// The repository: two levels up from src/cli, three from dist/src/cli.
const UP = path.resolve(__dirname, '../..');
const ROOT = path.basename(UP) === 'dist' ? path.dirname(UP) : UP;
const KAFKA_LOCAL = path.join(ROOT, 'deploy/kafka-local/kafka-local');
const CONSUMER = path.join(ROOT, 'consumers/app-logs.ts');
const TOPIC = 'app-logs';
const SERVICES = ['checkout', 'payments', 'search', 'auth', 'inventory', 'shipping'];
const MESSAGES = [
  'request handled',
  'cache miss',
  'upstream timeout',
  'payment declined',
  'user signed in',
  'retrying',
];

/** One realistic log line; about 1 in 200 is broken on purpose, to show the dead-letter topic at work. */
function logLine(n: number, now: number): string {
  if (n % 200 === 199)
    return n % 400 === 399 ? '{"ts": "not a time", "level": "info"' : `plain text line ${n}`;
  const service = SERVICES[n % SERVICES.length]!;
  const status = [200, 200, 200, 201, 404, 500, 402][n % 7]!;
  return JSON.stringify({
    ts: new Date(now).toISOString(),
    level: status >= 500 ? 'error' : status >= 400 ? 'warn' : 'info',
    service,
    host: `${service}-7d9f-${n % 4}`,
    message: MESSAGES[n % MESSAGES.length],
    status,
    latency_ms: Math.round(((n * 7919) % 100_000) / 10) / 10,
    trace_id: (BigInt(n) * 2654435761n).toString(16).padStart(32, '0'),
    attrs: { region: ['eu-west-1', 'us-east-1'][n % 2], attempt: n % 3 },
  });
}

/**
 * The demo: an embedded broker unless brokers are configured, the app-logs consumer
 * as one replica, a producer writing realistic logs for a while, progress as it goes,
 * and a summary of what landed in Lance.
 */
export async function runDemo(o: DemoOptions): Promise<void> {
  let startedBroker = false;
  let brokers = brokersFromEnv();
  if (!brokers) {
    o.print(
      'No KAFKA_BOOTSTRAP_SERVERS: starting the embedded Kafka broker (first run fetches its jars with Maven)…',
    );
    const status = spawnSync(KAFKA_LOCAL, ['status'], { encoding: 'utf8' });
    const start = spawnSync(KAFKA_LOCAL, ['start'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    if (start.status !== 0) throw new Error(`the embedded broker did not start:\n${start.stdout}`);
    startedBroker = status.status !== 0;
    o.print(start.stdout.trim());
    brokers = [`127.0.0.1:${process.env.KAFKA_LOCAL_PORT ?? 9092}`];
  }
  const kafka = new Kafka({ clientId: 'kafka-lance-demo', brokers, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    topics: [
      { topic: TOPIC, numPartitions: 6 },
      { topic: `${TOPIC}.dlq`, numPartitions: 1 },
    ],
    waitForLeaders: true,
  });
  const replica = await Replica.start({
    consumerPath: CONSUMER,
    overrides: { brokers, dataDir: o.dataDir },
    logger: o.logger,
    metrics: o.metrics,
  });
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  const value = async (name: string) => {
    const m = (await o.metrics.registry.getSingleMetric(name)?.get())?.values ?? [];
    return m.reduce((n, v) => n + v.value, 0);
  };
  const started = Date.now();
  let produced = 0;
  let broken = 0;
  const progress = setInterval(() => {
    void Promise.all([
      value('kafka_lance_staged_records_total'),
      value('kafka_lance_published_records_total'),
      value('kafka_lance_dead_letter_records_total'),
      value('kafka_lance_consumer_lag'),
    ]).then(([staged, published, dead, lag]) =>
      o.print(
        `${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s  produced ${produced}  staged ${staged}  published ${published}  dead letters ${dead}  lag ${lag}`,
      ),
    );
  }, 2_000);
  try {
    const tickMs = 100;
    for (let t = 0; t < (o.seconds * 1000) / tickMs; t++) {
      const batch = Math.max(1, Math.round((o.rate * tickMs) / 1000));
      const now = Date.now();
      const messages = Array.from({ length: batch }, (_, i) => ({ value: logLine(produced + i, now) }));
      broken += messages.filter((_, i) => (produced + i) % 200 === 199).length;
      await producer.send({ topic: TOPIC, acks: -1, messages });
      produced += batch;
      await new Promise((r) => setTimeout(r, Math.max(0, now + tickMs - Date.now())));
    }
    // Wait for the last records to be published (parts seal after a few seconds).
    const deadline = Date.now() + 60_000;
    while (
      (await value('kafka_lance_published_records_total')) < produced - broken &&
      Date.now() < deadline
    ) {
      await new Promise((r) => setTimeout(r, 500));
    }
  } finally {
    clearInterval(progress);
    await producer.disconnect();
  }
  const published = await value('kafka_lance_published_records_total');
  const dead = await value('kafka_lance_dead_letter_records_total');
  await replica.stop();
  await admin.disconnect();
  const lance = path.join(replica.consumer.dataDir, 'lance');
  o.print('');
  o.print(`Produced ${produced} log lines (${broken} broken on purpose) to topic ${TOPIC}.`);
  o.print(`Published ${published} rows into the Lance table ${replica.consumer.table} at ${lance}`);
  o.print(
    `(this run; earlier runs' rows stay in the table); ${dead} records went to ${TOPIC}.dlq with their reason.`,
  );
  o.print('Read it from Python:');
  o.print(
    `  python3 -c "import lancedb; t = lancedb.connect('${lance}').open_table('${replica.consumer.table}'); print(t.count_rows()); print(t.head(3))"`,
  );
  if (startedBroker) {
    spawnSync(KAFKA_LOCAL, ['stop'], { stdio: 'ignore' });
    o.print('Stopped the embedded broker.');
  }
}
