import { Command, InvalidArgumentError, Option } from 'commander';
import { errorMessage } from '../common/errors';
import { createLogger } from '../common/logger';
import { ConfigError, loadConsumer } from '../config';
import { Metrics } from '../metrics/metrics';
import { startMetricsServer } from '../metrics/server';
import { Replica } from '../replica';

const SHUTDOWN_TIMEOUT_MS = Number(process.env.KAFKA_LANCE_SHUTDOWN_TIMEOUT_MS ?? 25_000);

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError('expected a positive integer');
  return n;
}

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

export function buildCli(): Command {
  const program = new Command('kafka-lance')
    .description(
      'Consume Kafka topics in consumer groups, stage records durably as Arrow IPC, publish them into Lance tables exactly once.',
    )
    .showHelpAfterError();

  program
    .command('run')
    .description(
      'Run one replica of a consumer: consume, stage durably, commit offsets once staged. Start more replicas with the same definition to scale; SIGTERM or SIGINT stops it gracefully (a second signal exits at once).',
    )
    .requiredOption(
      '-c, --consumer <file>',
      'consumer definition (.ts, .js or .json), e.g. consumers/app-logs.ts',
    )
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
    .addOption(
      new Option('--test-kill-at-commit <n>', 'test only: SIGKILL when the nth offset commit is answered')
        .argParser(positiveInt)
        .hideHelp(),
    )
    .action(async (opts: RunOptions) => {
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
        killAtCommit: opts.testKillAtCommit ?? envInt('KAFKA_LANCE_TEST_KILL_AT_COMMIT'),
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
        starting
          .then((replica) => replica.stop())
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
      const replica = await starting;
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
      'Run the app-logs pipeline end to end: an embedded Kafka broker (unless KAFKA_BOOTSTRAP_SERVERS is set), one replica of consumers/app-logs.ts, a producer of realistic logs, progress every 2 s, then a summary of the Lance table.',
    )
    .addOption(new Option('--seconds <n>', 'how long to produce').argParser(positiveInt).default(30))
    .addOption(new Option('--rate <n>', 'log lines per second').argParser(positiveInt).default(5_000))
    .addOption(new Option('--data-dir <dir>', 'staging, ledger and Lance table').default('data/demo'))
    .addOption(new Option('--log-level <level>', 'JSON log level (stderr)').default('warn'))
    .action(async (opts: { seconds: number; rate: number; dataDir: string; logLevel: string }) => {
      const { runDemo } = await import('./demo');
      await runDemo({
        seconds: opts.seconds,
        rate: opts.rate,
        dataDir: opts.dataDir,
        metrics: new Metrics(),
        logger: createLogger({ level: opts.logLevel as 'warn' }, process.stderr),
        print: (line) => console.log(line),
      });
      process.exit(0);
    });

  program
    .command('validate')
    .description('Check a consumer definition without connecting; exits non-zero with field-named errors.')
    .requiredOption('-c, --consumer <file>', 'consumer definition (.ts, .js or .json)')
    .addOption(brokersOption)
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

interface RunOptions {
  consumer: string;
  brokers?: string[];
  dataDir?: string;
  logLevel: string;
  metricsPort: number;
  metricsHost: string;
  testKillAtCommit?: number;
}

function envInt(name: string): number | undefined {
  const raw = process.env[name];
  return raw ? positiveInt(raw) : undefined;
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
      console.error(`kafka-lance: ${errorMessage(error)}`);
      process.exit(1);
    });
}

if (require.main === module) runCli();
