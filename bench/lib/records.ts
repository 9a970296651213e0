/**
 * The bench's data: realistic JSON log records of ~800 bytes (the generator of the
 * `produce` command and the demo: timestamp, level, service, host, message, status,
 * latency, trace id, attrs), and the explicit schema every arm that needs one uses.
 */
import { logRecord } from '../../src/cli/log-records';

export const RECORD_BYTES = 800;

/** Record `n` of the bench topic, stamped `now`. */
export function benchRecord(n: number, now: number = Date.now()): string {
  return logRecord(n, now, { badRatio: 0, recordBytes: RECORD_BYTES }).value;
}

/** The explicit schema of the bench table (the fields of consumers/app-logs.ts). */
export const BENCH_FIELDS = {
  ts: 'timestamp',
  level: 'string',
  service: 'string',
  host: 'string',
  message: 'string',
  status: 'int32',
  latency_ms: 'float64',
  trace_id: 'string',
  attrs: 'json',
} as const;

/** A consumer definition (JSON) for `kafka-lance run` on the bench topic. */
export function benchConsumer(
  name: string,
  topic: string,
  deadLetterFile: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    name,
    topics: [topic],
    table: 'logs',
    schema: { fields: BENCH_FIELDS },
    deadLetter: { file: deadLetterFile },
    ...extra,
  };
}
