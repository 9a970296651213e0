import { type Command, Option } from 'commander';
import { loadConsumer } from '../../config';
import { tuneHeapGrowth } from '../../common/malloc-tuning';
import { parseFaults } from '../../faults/faults';
import { Replica } from '../../replica/replica';
import type { HeldSignals } from '../early-signals';
import { runReplicaLifecycle } from '../replica-lifecycle';
import { brokersOption, consumerOption, dataDirOption, logLevelOption } from './options';

interface RunOptions {
  consumer: string;
  brokers?: string[];
  dataDir?: string;
  logLevel: string;
  metricsPort: number;
  metricsHost: string;
}

/** `kafka-lance run`: one replica of a consumer, in this process until a signal or a failure. */
export function addRunCommand(program: Command, heldSignals?: HeldSignals): void {
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
      const overrides = { brokers: opts.brokers, dataDir: opts.dataDir };
      // Resolved here too, so that an unreachable broker can be reported by its address.
      const { brokers, client, tableRouting } = loadConsumer(opts.consumer, process.env, overrides);
      // Many routed tables keep batches alive into the old generation: tighter heaps there
      // (src/common/malloc-tuning.ts); one table keeps V8's growth, which costs less CPU.
      if (tableRouting.kind !== 'fixed') tuneHeapGrowth();
      await runReplicaLifecycle({
        brokers,
        tls: client.ssl !== undefined && client.ssl !== false,
        logLevel: opts.logLevel,
        metricsPort: opts.metricsPort,
        metricsHost: opts.metricsHost,
        heldSignals,
        start: ({ logger, metrics }) =>
          Replica.start({
            consumerPath: opts.consumer,
            overrides,
            logger,
            metrics,
            faults,
          }),
      });
    });
}
