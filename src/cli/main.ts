// First: kafkajs's consumer takes its Batch class when kafkajs loads (consumer-batch.ts).
import '../kafka/protocol/consumer-batch';
import { Command } from 'commander';
import { errorMessage } from '../common/errors';
import { scrubSecrets } from '../common/redaction';
import { ConfigError } from '../config';
import { addCompactCommand } from './commands/compact';
import { addDemoCommand } from './commands/demo';
import { addInspectCommand } from './commands/inspect';
import { addProduceCommand } from './commands/produce';
import { addRunCommand } from './commands/run';
import { addScaleDemoCommand } from './commands/scale-demo';
import { addValidateCommand } from './commands/validate';
import type { HeldSignals } from './early-signals';
import { CliError, type CliErrorCode } from './errors';
import { packageVersion } from './paths';

/**
 * The `kafka-lance` program: one command per file in ./commands, in the order `--help`
 * lists them. `heldSignals` (from bin/kafka-lance) go to `run`; any other command
 * releases them as it starts.
 */
export function buildCli(heldSignals?: HeldSignals): Command {
  const program = new Command('kafka-lance')
    .description(
      'Consume Kafka topics in consumer groups, stage records durably as Arrow IPC, publish them into Lance tables exactly once.',
    )
    .version(packageVersion(), '-V, --version', 'print the version (from package.json)')
    .showHelpAfterError();
  program.hook('preAction', (_program, command) => {
    if (command.name() !== 'run') heldSignals?.release();
  });
  addRunCommand(program, heldSignals);
  for (const add of [
    addDemoCommand,
    addScaleDemoCommand,
    addProduceCommand,
    addInspectCommand,
    addCompactCommand,
    addValidateCommand,
  ])
    add(program);
  return program;
}

/** What the operator must fix in the definition or the command line: exit code 2, like a ConfigError. */
const CONFIGURATION_ERRORS: ReadonlySet<CliErrorCode> = new Set([
  'CONSUMER_FILE_MISSING',
  'BAD_ARGUMENT',
  'BROKER_AUTHENTICATION',
]);

/** Parses argv and runs the command; configuration errors exit with code 2 and field-named messages. */
export function runCli(argv: readonly string[] = process.argv, heldSignals?: HeldSignals): void {
  buildCli(heldSignals)
    .parseAsync([...argv])
    .catch((error: unknown) => {
      if (error instanceof ConfigError) {
        console.error(scrubSecrets(error.message));
        process.exit(2);
      }
      if (error instanceof CliError) {
        console.error(scrubSecrets(`kafka-lance: ${error.message}`));
        process.exit(CONFIGURATION_ERRORS.has(error.code) ? 2 : 1);
      }
      console.error(scrubSecrets(`kafka-lance: ${errorMessage(error)}`));
      process.exit(1);
    });
}

if (require.main === module) runCli();
