import { defineConsumer } from 'kafka-lance';

/**
 * Application logs as JSON lines, one Lance table `app_logs`. Typical record:
 *   {"ts":"2026-11-30T12:00:00.123Z","level":"error","service":"checkout",
 *    "host":"checkout-7d9f-2","message":"payment declined","status":402,
 *    "latency_ms":83.2,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","attrs":{"card":"visa"}}
 *
 * Brokers come from KAFKA_BOOTSTRAP_SERVERS (or --brokers). Records that are not
 * JSON objects of this shape go to the dead-letter topic with the reason.
 */
export default defineConsumer({
  name: 'app-logs',
  topics: ['app-logs'],
  table: 'app_logs',
  format: 'json',
  schema: {
    fields: {
      ts: { type: 'timestamp', nullable: false },
      level: { type: 'string', nullable: false },
      service: { type: 'string', nullable: false },
      host: 'string',
      message: 'string',
      status: 'int32',
      latency_ms: 'float64',
      trace_id: 'string',
      attrs: 'json',
    },
  },
  // Parts are keyed by the minute the log line was written, not when it arrived.
  eventTimeField: 'ts',
  deadLetter: { topic: 'app-logs.dlq' },
  durabilityIntervalMs: 1000,
  staging: { maxPartBytes: 64 * 1024 * 1024, maxPartAgeMs: 5_000 },
});
