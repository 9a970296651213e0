import pino from 'pino';

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

export function createLogger(options: LoggerOptions = {}, destination?: pino.DestinationStream): Logger {
  const config: pino.LoggerOptions = {
    level: options.level ?? process.env.KAFKA_LANCE_LOG_LEVEL ?? 'info',
    name: options.name ?? 'kafka-lance',
    redact: { paths: REDACT, censor: '[redacted]' },
    base: { pid: process.pid },
  };
  return destination ? pino(config, destination) : pino(config);
}

export const silentLogger = (): Logger => pino({ level: 'silent' });
