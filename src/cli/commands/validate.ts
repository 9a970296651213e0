import type { Command } from 'commander';
import { loadConsumer } from '../../config';
import { brokersOption, consumerOption } from './options';

/** `kafka-lance validate`: checks a definition without connecting (but runs a .ts/.js one: it is code). */
export function addValidateCommand(program: Command): void {
  program
    .command('validate')
    .description(
      'Check a consumer definition without connecting; exits non-zero with field-named errors. A .ts or .js definition is a program: validate runs it (and what it imports) with your privileges, as a replica does with its own; validate only definitions you trust, or use .json.',
    )
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
          `topics ${[...(consumer.topics ?? []), ...consumer.topicPatterns.map((p) => `/${p}/`)].join(',')}, ` +
          `table ${consumer.tableRouting.kind === 'route' ? `route (default ${consumer.table})` : consumer.table}`,
      );
    });
}
