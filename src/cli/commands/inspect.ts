import type { Command } from 'commander';
import { loadConsumer } from '../../config';
import { formatInspect, inspect } from '../inspect';
import { brokersOption, consumerOption, dataDirOption } from './options';
import { scrubSecrets } from '../../common/redaction';

/** `kafka-lance inspect`: the state of a consumer, read only. */
export function addInspectCommand(program: Command): void {
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
      // Scrubbed like a log line: a broker's or store's error text may echo an option.
      if (opts.json) console.log(scrubSecrets(JSON.stringify(report, null, 2)));
      else for (const line of formatInspect(report)) console.log(scrubSecrets(line));
      // The local part of the report is still worth printing; the exit code says it is partial.
      if (!report.kafka.reachable) {
        console.error(scrubSecrets(`kafka-lance: ${report.kafka.error ?? 'broker unreachable'}`));
        process.exitCode = 1;
      }
    });
}
