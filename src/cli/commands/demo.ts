import { type Command, Option } from 'commander';
import { CliError } from '../errors';
import { rateOption, secondsOption } from './options';

interface DemoCommandOptions {
  seconds: number;
  rate: number;
  dataDir: string;
  logLevel: string;
  vectors?: boolean;
  format: 'json' | 'avro';
}

/** `kafka-lance demo`: the log demo, or its Avro or vector variant; the demos load only when chosen. */
export function addDemoCommand(program: Command): void {
  program
    .command('demo')
    .description(
      'Run the app-logs pipeline end to end: an embedded Kafka broker (unless KAFKA_BOOTSTRAP_SERVERS is set), one replica of consumers/app-logs.ts, a producer of realistic logs, a progress line, then a summary read back from the Lance table. Exits non-zero when the numbers do not add up.',
    )
    .addOption(secondsOption())
    .addOption(rateOption(5_000))
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
      const { runDemo, terminalOutput } = await import('../demo');
      if (opts.vectors && opts.format === 'avro')
        throw new CliError('BAD_ARGUMENT', '--vectors and --format avro are two demos: pick one');
      const output = terminalOutput();
      if (opts.vectors) {
        const { runVectorDemo, vectorDemoOptions } = await import('../vector-demo');
        await runVectorDemo({ ...vectorDemoOptions(opts, command), ...output });
        process.exit(0);
      }
      // The log demo and its Avro variant take the same options.
      const options = {
        seconds: opts.seconds,
        rate: opts.rate,
        dataDir: opts.dataDir,
        logLevel: opts.logLevel,
        ...output,
      };
      if (opts.format === 'avro') {
        const { runAvroDemo } = await import('../avro-demo');
        await runAvroDemo(options);
        process.exit(0);
      }
      await runDemo(options);
      process.exit(0);
    });
}
