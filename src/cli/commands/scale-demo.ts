import { type Command, Option } from 'commander';
import type { ScaleDemoOptions } from '../scale-demo';
import { brokersOption, logLevelOption, positiveInt, rateOption, secondsOption } from './options';

type ScaleDemoCommandOptions = Omit<ScaleDemoOptions, 'print' | 'progress' | 'brokers'> & {
  brokers?: string[];
};

/** `kafka-lance scale-demo`: several replicas of one consumer on one machine, one of them killed and restarted. */
export function addScaleDemoCommand(program: Command): void {
  program
    .command('scale-demo')
    .description(
      'Scale-out on one machine: --replicas replicas of consumers/app-logs.ts in one group on a --partitions topic, one shared Lance table, while producing; one replica is SIGKILLed at 1/3 of the run and restarted on its data dir at 2/3; then a summary (per replica, checks read back from the table, the inspect report). Exits non-zero when a record is missing or twice.',
    )
    .addOption(secondsOption())
    .addOption(rateOption(2_000))
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
    .action(async (opts: ScaleDemoCommandOptions) => {
      const { terminalOutput } = await import('../demo');
      const { runScaleDemo } = await import('../scale-demo');
      await runScaleDemo({ ...opts, brokers: opts.brokers, ...terminalOutput() });
      process.exit(0);
    });
}
