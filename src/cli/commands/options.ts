import { InvalidArgumentError, Option } from 'commander';
import { errorMessage } from '../../common/errors';
import { parseDuration } from '../compact';
import { requireConsumerFile } from '../paths';

/**
 * Argument parsers and the options several commands share, so that a flag reads and
 * explains itself the same way in every command that takes it.
 */

export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError('expected a positive integer');
  return n;
}

export function nonNegativeInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError('expected 0 or a positive integer');
  return n;
}

export function ratio(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0 || n > 1) throw new InvalidArgumentError('expected a number from 0 to 1');
  return n;
}

export function duration(value: string): number {
  try {
    return parseDuration(value);
  } catch (error) {
    throw new InvalidArgumentError(errorMessage(error));
  }
}

/** A comma-separated broker list, each entry trimmed. */
export const brokerList = (value: string): string[] => value.split(',').map((b) => b.trim());

export const consumerOption = (): Option =>
  new Option('-c, --consumer <file>', 'consumer definition (.ts, .js or .json), e.g. consumers/app-logs.ts')
    .makeOptionMandatory()
    .argParser((file) => requireConsumerFile(file));

export const brokersOption = new Option(
  '--brokers <list>',
  'comma-separated bootstrap brokers; overrides KAFKA_BOOTSTRAP_SERVERS (alias KAFKA_BROKERS) and the definition',
).argParser(brokerList);

export const dataDirOption = new Option(
  '--data-dir <dir>',
  'staging, ledger and dead-letter files; overrides KAFKA_LANCE_DATA_DIR and the definition (default ./data)',
);

export const logLevelOption = new Option('--log-level <level>', 'JSON log level')
  .choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
  .default(process.env.KAFKA_LANCE_LOG_LEVEL ?? 'info');

/** How long a demo produces (the same flag in every demo). */
export const secondsOption = (): Option =>
  new Option('--seconds <n>', 'how long to produce').argParser(positiveInt).default(30);

/** How fast a demo produces; each demo has its own default rate. */
export const rateOption = (defaultRate: number): Option =>
  new Option('--rate <n>', 'log lines per second').argParser(positiveInt).default(defaultRate);
