import type { BrokerAuthFailure } from '../kafka/protocol/broker-auth-failure';
import { KafkaJSBrokerNotFound, KafkaJSConnectionError, KafkaJSNumberOfRetriesExceeded } from 'kafkajs';

/**
 * Errors the command line raises on purpose. Each message says what happened and
 * what to do about it; `code` is what callers (and tests) branch on. They live here
 * rather than in src/common/errors.ts so that the CLI's closed set of codes can grow
 * without touching the error union the pipeline branches on.
 */
export type CliErrorCode =
  | 'CONSUMER_FILE_MISSING'
  | 'BROKER_UNREACHABLE'
  | 'BROKER_AUTHENTICATION'
  | 'TABLE_MISSING'
  | 'DEMO_MISMATCH'
  | 'REPLICA_FAILED'
  | 'SCHEMA_REGISTRY_UNAVAILABLE'
  | 'BAD_ARGUMENT'
  | 'COMPACT_FAILED';

export class CliError extends Error {
  constructor(
    readonly code: CliErrorCode,
    message: string,
    readonly context: Readonly<Record<string, unknown>> = {},
    cause?: unknown,
  ) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
  }
}

export class ConsumerFileMissingError extends CliError {
  constructor(readonly file: string) {
    super(
      'CONSUMER_FILE_MISSING',
      `consumer definition ${file} does not exist; pass the path of a .ts, .js or .json definition with -c, e.g. -c consumers/app-logs.ts`,
      { file },
    );
  }
}

export class BrokerUnreachableError extends CliError {
  constructor(
    readonly brokers: readonly string[],
    cause: unknown,
  ) {
    super(
      'BROKER_UNREACHABLE',
      `cannot reach the Kafka broker at ${brokers.join(',')} (${causeText(cause)}); start it (npm run kafka:start for the local one) or pass the right address with --brokers or KAFKA_BOOTSTRAP_SERVERS`,
      { brokers },
      cause,
    );
  }
}

/** The broker refused the client's credentials or TLS: exit code 2, one line naming the cause and the option. */
export class BrokerAuthenticationError extends CliError {
  constructor(
    readonly brokers: readonly string[],
    readonly failure: BrokerAuthFailure,
  ) {
    super(
      'BROKER_AUTHENTICATION',
      `cannot connect to the Kafka broker at ${brokers.join(',')}: ${failure.cause}; check ${failure.option}`,
      { brokers, failure },
    );
  }
}

export class TableMissingError extends CliError {
  constructor(
    readonly table: string,
    readonly uri: string,
  ) {
    super(
      'TABLE_MISSING',
      `the Lance table ${table} does not exist at ${uri} yet: nothing has been published there. It is created by the first publication of \`kafka-lance run\` for this consumer (check --data-dir, or the definition's lance.uri).`,
      { table, uri },
    );
  }
}

export class DemoMismatchError extends CliError {
  constructor(readonly problems: readonly string[]) {
    super(
      'DEMO_MISMATCH',
      `the numbers do not add up:\n${problems.map((p) => `  - ${p}`).join('\n')}\nThe replica's log file says why; a data dir reused across brokers can also cause this (use a fresh --data-dir).`,
      { problems },
    );
  }
}

function causeText(error: unknown): string {
  let e: unknown = error;
  // kafkajs wraps the socket error: "retries exceeded" → connection error → ECONNREFUSED.
  while (e instanceof KafkaJSNumberOfRetriesExceeded && e.cause) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}

/** A failure to connect at all (refused, unknown host, timed out), as opposed to a broker that answered with an error. */
export function isConnectionFailure(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; depth++) {
    if (e instanceof KafkaJSConnectionError || e instanceof KafkaJSBrokerNotFound) return true;
    e = e.cause;
  }
  return false;
}
