import { Command, InvalidArgumentError, Option } from 'commander';
import { errorMessage } from '../common/errors';
import { createLogger } from '../common/logger';
import { ConfigError, brokersFromEnv, loadConsumer } from '../config';
import { Metrics } from '../metrics/metrics';
import { startMetricsServer } from '../metrics/server';
import { parseFaults } from '../faults/faults';
import { Replica } from '../replica';
import { DEFAULT_RETENTION, compact, parseDuration } from './compact';
import { BrokerUnreachableError, CliError, isConnectionFailure } from './errors';
import { formatBytes, formatInspect, inspect } from './inspect';
import { packageVersion, requireConsumerFile } from './paths';
import type { ScaleDemoOptions } from './scale-demo';

const SHUTDOWN_TIMEOUT_MS = Number(process.env.KAFKA_LANCE_SHUTDOWN_TIMEOUT_MS ?? 25_000);
/** The last part of a graceful stop in which no publication starts: 1/3 of it, at most 10 s. */
const DRAIN_MARGIN_MS = Math.min(10_000, SHUTDOWN_TIMEOUT_MS / 3);

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError('expected a positive integer');
  return n;
}

function nonNegativeInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError('expected 0 or a positive integer');
  return n;
}

function ratio(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0 || n > 1) throw new InvalidArgumentError('expected a number from 0 to 1');
  return n;
}

function duration(value: string): number {
  try {
    return parseDuration(value);
  } catch (error) {
    throw new InvalidArgumentError(errorMessage(error));
  }
}

const consumerOption = () =>
  new Option('-c, --consumer <file>', 'consumer definition (.ts, .js or .json), e.g. consumers/app-logs.ts')
    .makeOptionMandatory()
    .argParser((file) => requireConsumerFile(file));

const brokersOption = new Option(
  '--brokers <list>',
  'comma-separated bootstrap brokers; overrides KAFKA_BOOTSTRAP_SERVERS (alias KAFKA_BROKERS) and the definition',
).argParser((v) => v.split(',').map((b) => b.trim()));
const dataDirOption = new Option(
  '--data-dir <dir>',
  'staging, ledger and dead-letter files; overrides KAFKA_LANCE_DATA_DIR and the definition (default ./data)',
);
const logLevelOption = new Option('--log-level <level>', 'JSON log level')
  .choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
  .default(process.env.KAFKA_LANCE_LOG_LEVEL ?? 'info');

interface DemoCommandOptions {
  seconds: number;
  rate: number;
  dataDir: string;
  logLevel: string;
  vectors?: boolean;
  format: 'json' | 'avro';
}

export function buildCli(): Command {
  const program = new Command('kafka-lance')
    .description(
      'Consume Kafka topics in consumer groups, stage records durably as Arrow IPC, publish them into Lance tables exactly once.',
    )
    .version(packageVersion(), '-V, --version', 'print the version (from package.json)')
    .showHelpAfterError();

  program
    .command('run')
    .description(
      'Run one replica of a consumer: consume, stage durably, commit offsets once staged. Start more replicas with the same definition to scale; SIGTERM or SIGINT stops it gracefully (a second signal exits at once).',
    )
    .addOption(consumerOption())
    .addOption(brokersOption)
    .addOption(dataDirOption)
    .addOption(logLevelOption)
    .addOption(
      new Option('--metrics-port <port>', 'port of /metrics, /healthz and /readyz (0: any free port)')
        .argParser((v) => Number(v))
        .default(Number(process.env.KAFKA_LANCE_METRICS_PORT ?? 9464)),
    )
    .addOption(
      new Option('--metrics-host <address>', 'bind address of the metrics server').default(
        process.env.KAFKA_LANCE_METRICS_HOST ?? '0.0.0.0',
      ),
    )
    .addHelpText(
      'after',
      `
Example:
  KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 kafka-lance run -c consumers/app-logs.ts --data-dir /var/lib/kafka-lance`,
    )
    .action(async (opts: RunOptions) => {
      // Test-only faults, read once here: a bad KAFKA_LANCE_TEST_* value stops the start.
      const faults = parseFaults(process.env);
      // Resolved here too, so that an unreachable broker can be reported by its address.
      const { brokers } = loadConsumer(opts.consumer, process.env, {
        brokers: opts.brokers,
        dataDir: opts.dataDir,
      });
      const logger = createLogger({ level: opts.logLevel as 'info' });
      const metrics = new Metrics();
      const running: { replica?: Replica } = {};
      // Served before recovery starts: /healthz answers at once, /readyz once joined.
      const server = await startMetricsServer({
        port: opts.metricsPort,
        host: opts.metricsHost,
        metrics,
        ready: () => running.replica?.ready ?? false,
      });
      logger.info(
        { event: 'metrics.listening', port: server.port, host: opts.metricsHost },
        'metrics server listening',
      );
      // Handlers go in before startup: a signal during recovery or the first join still
      // gets a graceful stop once the replica is up.
      let stopping = false;
      const starting = Replica.start({
        consumerPath: opts.consumer,
        overrides: { brokers: opts.brokers, dataDir: opts.dataDir },
        logger,
        metrics,
        faults,
      });
      const onSignal = (signal: NodeJS.Signals) => {
        if (stopping) {
          logger.warn({ event: 'replica.signal', signal }, 'second signal: exiting at once');
          process.exit(130);
        }
        stopping = true;
        logger.info({ event: 'replica.signal', signal }, 'signal received: stopping gracefully');
        const timer = setTimeout(() => {
          logger.error(
            { event: 'replica.stop.timeout', timeoutMs: SHUTDOWN_TIMEOUT_MS },
            'graceful stop timed out',
          );
          process.exit(1);
        }, SHUTDOWN_TIMEOUT_MS);
        timer.unref();
        // Publications start until a margin before the timeout (one may take seconds on a
        // slow store; a Lance add is never interrupted), so the exit still comes in time.
        const drainUntil = Date.now() + SHUTDOWN_TIMEOUT_MS - DRAIN_MARGIN_MS;
        starting
          .then((replica) => replica.stop(drainUntil))
          .then(
            () => process.exit(0),
            (error: unknown) => {
              logger.error({ event: 'replica.stop.failed', err: error }, errorMessage(error));
              process.exit(1);
            },
          );
      };
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
      const replica = await starting.catch((error: unknown) => {
        throw isConnectionFailure(error) ? new BrokerUnreachableError(brokers, error) : error;
      });
      running.replica = replica;
      const error = await replica.failed;
      logger.fatal(
        { event: 'replica.failed', err: error },
        'replica failed; exiting so that a restart recovers',
      );
      process.exit(1);
    });

  program
    .command('demo')
    .description(
      'Run the app-logs pipeline end to end: an embedded Kafka broker (unless KAFKA_BOOTSTRAP_SERVERS is set), one replica of consumers/app-logs.ts, a producer of realistic logs, a progress line, then a summary read back from the Lance table. Exits non-zero when the numbers do not add up.',
    )
    .addOption(new Option('--seconds <n>', 'how long to produce').argParser(positiveInt).default(30))
    .addOption(new Option('--rate <n>', 'log lines per second').argParser(positiveInt).default(5_000))
    .addOption(
      new Option('--data-dir <dir>', 'staging, ledger, logs and the Lance table').default('data/demo'),
    )
    .addOption(
      new Option('--log-level <level>', "level of the replica's JSON logs (written to <data-dir>/logs/)")
        .choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace'])
        .default('info'),
    )
    .addOption(
      new Option(
        '--vectors',
        'the vector demo instead: consumers/documents.ts, documents with 384-dimension embeddings (--rate documents per second), an IVF_PQ index built while producing, then a nearest-neighbour query on the live table',
      ),
    )
    .addOption(
      new Option(
        '--format <format>',
        'avro: the log records Avro-encoded in the Confluent wire format (consumers/app-logs-avro.ts), with a Schema Registry (the local one unless SCHEMA_REGISTRY_URL is set) and a field added half-way',
      )
        .choices(['json', 'avro'])
        .default('json'),
    )
    .addHelpText(
      'after',
      `
Example:
  kafka-lance demo --seconds 10 --rate 2000 --data-dir /tmp/kl-demo
  kafka-lance demo --format avro --seconds 10 --rate 2000 --data-dir /tmp/kl-avro
  kafka-lance demo --vectors --seconds 20 --rate 500 --data-dir /tmp/kl-vectors`,
    )
    .action(async (opts: DemoCommandOptions, command: Command) => {
      const { runDemo, terminalOutput } = await import('./demo');
      if (opts.vectors && opts.format === 'avro')
        throw new CliError('BAD_ARGUMENT', '--vectors and --format avro are two demos: pick one');
      if (opts.format === 'avro') {
        const { runAvroDemo } = await import('./avro-demo');
        await runAvroDemo({
          seconds: opts.seconds,
          rate: opts.rate,
          dataDir: opts.dataDir,
          logLevel: opts.logLevel,
          ...terminalOutput(),
        });
        process.exit(0);
      }
      if (opts.vectors) {
        const { runVectorDemo, vectorDemoOptions } = await import('./vector-demo');
        await runVectorDemo({ ...vectorDemoOptions(opts, command), ...terminalOutput() });
        process.exit(0);
      }
      await runDemo({
        seconds: opts.seconds,
        rate: opts.rate,
        dataDir: opts.dataDir,
        logLevel: opts.logLevel,
        ...terminalOutput(),
      });
      process.exit(0);
    });

  program
    .command('scale-demo')
    .description(
      'Scale-out on one machine: --replicas replicas of consumers/app-logs.ts in one group on a --partitions topic, one shared Lance table, while producing; one replica is SIGKILLed at 1/3 of the run and restarted on its data dir at 2/3; then a summary (per replica, checks read back from the table, the inspect report). Exits non-zero when a record is missing or twice.',
    )
    .addOption(new Option('--seconds <n>', 'how long to produce').argParser(positiveInt).default(30))
    .addOption(new Option('--rate <n>', 'log lines per second').argParser(positiveInt).default(2_000))
    .addOption(new Option('--partitions <n>', 'partitions of the topic').argParser(positiveInt).default(12))
    .addOption(new Option('--replicas <n>', 'replicas at the start').argParser(positiveInt).default(3))
    .addOption(
      new Option('--data-dir <dir>', 'replica-N data dirs, logs/ and the shared lance/ table').default(
        'data/scale-demo',
      ),
    )
    .addOption(brokersOption)
    .addOption(logLevelOption)
    .addHelpText(
      'after',
      '\nExample:\n  kafka-lance scale-demo --seconds 20 --rate 1000 --data-dir /tmp/kl-scale',
    )
    .action(
      async (opts: Omit<ScaleDemoOptions, 'print' | 'progress' | 'brokers'> & { brokers?: string[] }) => {
        const { terminalOutput } = await import('./demo');
        const { runScaleDemo } = await import('./scale-demo');
        await runScaleDemo({ ...opts, brokers: opts.brokers, ...terminalOutput() });
        process.exit(0);
      },
    );

  program
    .command('produce')
    .description(
      'Load generator: write realistic JSON log records (the app-logs shape) to a topic, a share of them undecodable on purpose; creates the topic when it is missing.',
    )
    .requiredOption('-t, --topic <name>', 'topic to write to')
    .addOption(new Option('--count <n>', 'records to write').argParser(positiveInt).default(10_000))
    .addOption(
      new Option('--rate <n>', 'records per second; 0 = as fast as possible')
        .argParser(nonNegativeInt)
        .default(0),
    )
    .addOption(
      new Option(
        '--record-bytes <n>',
        'approximate size of a record in bytes (the message is padded); 0 = natural (~250)',
      )
        .argParser(nonNegativeInt)
        .default(0),
    )
    .addOption(
      new Option('--bad-ratio <r>', 'share of records that are not JSON (dead letters), 0 to 1')
        .argParser(ratio)
        .default(0),
    )
    .addOption(
      new Option('--partitions <n>', 'partitions of the topic when it is created')
        .argParser(positiveInt)
        .default(6),
    )
    .addOption(
      new Option(
        '--brokers <list>',
        'comma-separated bootstrap brokers (default: KAFKA_BOOTSTRAP_SERVERS, KAFKA_BROKERS, else the local broker 127.0.0.1:9092)',
      ).argParser((v) => v.split(',').map((b) => b.trim())),
    )
    .addHelpText(
      'after',
      `
Example:
  kafka-lance produce --topic app-logs --count 100000 --rate 5000 --record-bytes 512 --bad-ratio 0.01 --partitions 6`,
    )
    .action(async (opts: ProduceCliOptions) => {
      const { produce } = await import('./produce');
      const brokers = opts.brokers ??
        brokersFromEnv() ?? [`127.0.0.1:${process.env.KAFKA_LOCAL_PORT ?? 9092}`];
      const result = await produce({
        brokers,
        topic: opts.topic,
        count: opts.count,
        rate: opts.rate,
        recordBytes: opts.recordBytes,
        badRatio: opts.badRatio,
        partitions: opts.partitions,
        progress: (line) => console.error(line),
      });
      console.log(
        `produced ${result.produced} records (${result.bad} undecodable on purpose) to ${result.topic}` +
          ` (${result.partitions} partitions${result.created ? ', created' : ''}) in ${result.seconds.toFixed(1)} s:` +
          ` ${Math.round(result.produced / Math.max(result.seconds, 0.001))} records/s,` +
          ` ${Math.round(result.bytes / Math.max(result.produced, 1))} bytes/record on average`,
      );
    });

  program
    .command('inspect')
    .description(
      'Show the state of a consumer: its Lance table (versions, fragments, rows), per partition the highest _offset in Lance vs the committed offset vs the log end, staging parts, publication ledger and dead letters. Reads only.',
    )
    .addOption(consumerOption())
    .addOption(brokersOption)
    .addOption(dataDirOption)
    .option('--json', 'print the report as JSON')
    .addHelpText(
      'after',
      `
Example:
  kafka-lance inspect -c consumers/app-logs.ts --data-dir data/demo --brokers 127.0.0.1:9092
  kafka-lance inspect -c consumers/app-logs.ts --data-dir data/demo --json | jq .partitions`,
    )
    .action(async (opts: { consumer: string; brokers?: string[]; dataDir?: string; json?: boolean }) => {
      const consumer = loadConsumer(opts.consumer, process.env, {
        brokers: opts.brokers,
        dataDir: opts.dataDir,
      });
      const report = await inspect(consumer);
      if (opts.json) console.log(JSON.stringify(report, null, 2));
      else for (const line of formatInspect(report)) console.log(line);
      // The local part of the report is still worth printing; the exit code says it is partial.
      if (!report.kafka.reachable) {
        console.error(`kafka-lance: ${report.kafka.error ?? 'broker unreachable'}`);
        process.exitCode = 1;
      }
    });

  program
    .command('compact')
    .description(
      'Compact the Lance table of a consumer (LanceDB optimize: merge small fragments, update indexes) and remove versions that stopped being the latest more than --retention ago. Safe while replicas run on a store with atomic commits; not beside a declared single writer (lance.singleWriter).',
    )
    .addOption(consumerOption())
    .addOption(dataDirOption)
    .addOption(
      new Option(
        '--retention <duration>',
        "keep versions newer than this (e.g. 30m, 1h, 7d); LanceDB's default is 7d",
      )
        .argParser(duration)
        .default(parseDuration(DEFAULT_RETENTION), DEFAULT_RETENTION),
    )
    .option(
      '--writers-stopped',
      'the table has no running writer (required when the definition declares lance.singleWriter)',
      false,
    )
    .addHelpText(
      'after',
      `
Example:
  kafka-lance compact -c consumers/app-logs.ts --data-dir data/demo --retention 1h`,
    )
    .action(
      async (opts: { consumer: string; dataDir?: string; retention: number; writersStopped: boolean }) => {
        // Compaction needs no broker: any value satisfies the definition's broker check.
        const consumer = loadConsumer(opts.consumer, process.env, {
          brokers: brokersFromEnv() ?? ['(not needed)'],
          dataDir: opts.dataDir,
        });
        if (consumer.lance.singleWriter && !opts.writersStopped) {
          // On a store without atomic commits, compact's commits beside the declared single
          // writer's could overwrite a publication: the operator must say the writer is stopped.
          throw new CliError(
            'BAD_ARGUMENT',
            `${consumer.name} declares lance.singleWriter: compact commits to the table too, so it runs only while that replica is stopped; stop it and pass --writers-stopped`,
          );
        }
        const r = await compact(consumer, opts.retention);
        const shape = (x: typeof r.before) =>
          `${plural(x.fragments, 'fragment')} (${x.smallFragments} small), ${plural(x.versions, 'version')} (current ${x.version}), ${x.rows} rows, ${formatBytes(x.bytes)}`;
        console.log(`Lance table ${consumer.table} at ${r.path}`);
        console.log(`  before: ${shape(r.before)}`);
        console.log(`  after:  ${shape(r.after)}`);
        console.log(
          `  compaction merged ${r.fragmentsRemoved} fragments into ${r.fragmentsAdded}; cleanup removed ${r.versionsRemoved} versions older than ${formatDuration(r.retentionMs)} (${formatBytes(r.bytesRemoved)})`,
        );
        for (const i of r.indexes)
          console.log(
            `  index ${i.index} on ${i.column} (${i.type}): ${i.state}, ${i.indexedRows} indexed, ${i.unindexedRows} unindexed${i.error !== undefined ? ` (${i.error})` : ''}`,
          );
      },
    );

  program
    .command('validate')
    .description('Check a consumer definition without connecting; exits non-zero with field-named errors.')
    .addOption(consumerOption())
    .addOption(brokersOption)
    .addHelpText(
      'after',
      `
Example:
  kafka-lance validate -c consumers/app-logs.ts`,
    )
    .action((opts: { consumer: string; brokers?: string[] }) => {
      const consumer = loadConsumer(opts.consumer, process.env, {
        brokers: opts.brokers ?? ['(not checked)'],
      });
      console.log(
        `${consumer.source}: valid — consumer ${consumer.name}, group ${consumer.groupId}, ` +
          `topics ${consumer.topics?.join(',') ?? `/${consumer.topicsRegex}/`}, table ${consumer.table}`,
      );
    });
  return program;
}

interface ProduceCliOptions {
  topic: string;
  count: number;
  rate: number;
  recordBytes: number;
  badRatio: number;
  partitions: number;
  brokers?: string[];
}

const plural = (count: number, noun: string): string => `${count} ${noun}${count === 1 ? '' : 's'}`;

function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1_000],
  ] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

interface RunOptions {
  consumer: string;
  brokers?: string[];
  dataDir?: string;
  logLevel: string;
  metricsPort: number;
  metricsHost: string;
}

/** Parses argv and runs the command; configuration errors exit with code 2 and field-named messages. */
export function runCli(argv: readonly string[] = process.argv): void {
  buildCli()
    .parseAsync([...argv])
    .catch((error: unknown) => {
      if (error instanceof ConfigError) {
        console.error(error.message);
        process.exit(2);
      }
      if (error instanceof CliError) {
        console.error(`kafka-lance: ${error.message}`);
        process.exit(error.code === 'CONSUMER_FILE_MISSING' || error.code === 'BAD_ARGUMENT' ? 2 : 1);
      }
      console.error(`kafka-lance: ${errorMessage(error)}`);
      process.exit(1);
    });
}

if (require.main === module) runCli();
