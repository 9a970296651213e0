import pino from 'pino';
import { scrubSecrets } from './redaction';

/** Newline-delimited JSON logs (pino): `level`, `time`, `msg` and context fields. */
export type Logger = pino.Logger;

export interface LoggerOptions {
  readonly level?: pino.LevelWithSilent;
  readonly name?: string;
}

/**
 * Secrets must never reach a log line: these paths are censored wherever they
 * appear in a logged object (kafkajs client options are logged at start).
 */
const REDACT = [
  '*.password',
  '*.*.password',
  'sasl.password',
  'ssl.key',
  'ssl.passphrase',
  '*.ssl.key',
  '*.sasl.password',
  '*.secretAccessKey',
  '*.aws_secret_access_key',
  '*.*.aws_secret_access_key',
  '*.*.secretAccessKey',
  '*.*.key',
];

/**
 * Every line passes the registered secrets' scrub (redaction.ts) on its way out: the
 * paths above cover the objects kafka-lance logs itself, this covers a secret echoed
 * inside any other text (an error message of a library).
 */
function scrubbing(target: pino.DestinationStream): pino.DestinationStream {
  const flushable = target as pino.DestinationStream & { flushSync?: () => void };
  const scrubbed: pino.DestinationStream & { flushSync?: () => void } = {
    write: (line: string) => target.write(scrubSecrets(line)),
  };
  // pino flushes a synchronous destination itself on a fatal line: keep that path.
  if (flushable.flushSync) scrubbed.flushSync = () => flushable.flushSync?.();
  return scrubbed;
}

// Without a destination: stdout through SonicBoom, asynchronous and flushed at exit, as
// pino's own default is.
export function createLogger(options: LoggerOptions = {}, destination?: pino.DestinationStream): Logger {
  const config: pino.LoggerOptions = {
    level: options.level ?? process.env.KAFKA_LANCE_LOG_LEVEL ?? 'info',
    name: options.name ?? 'kafka-lance',
    redact: { paths: REDACT, censor: '[redacted]' },
    base: { pid: process.pid },
  };
  return pino(
    config,
    scrubbing(destination ?? pino.destination({ dest: process.stdout.fd || 1, sync: false })),
  );
}

export const silentLogger = (): Logger => pino({ level: 'silent' });
