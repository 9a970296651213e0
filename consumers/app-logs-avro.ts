import { defineConsumer } from 'kafka-lance';

/**
 * The app-logs records as Avro in the Confluent wire format (`npm run demo -- --format avro`),
 * one Lance table `app_logs_avro`. The columns follow the writer schemas in the registry at
 * SCHEMA_REGISTRY_URL (the Confluent-compatible API base): a field a newer schema version adds
 * becomes a new nullable column. Values that are not in the wire format, and payloads their
 * schema cannot read, go to the dead-letter topic with the reason.
 */
export default defineConsumer({
  name: 'app-logs-avro',
  topics: ['app-logs-avro'],
  table: 'app_logs_avro',
  format: 'avro',
  schema: 'infer',
  schemaRegistry: { url: process.env.SCHEMA_REGISTRY_URL ?? 'http://127.0.0.1:8081/apis/ccompat/v7' },
  deadLetter: { topic: 'app-logs-avro.dlq' },
  durabilityIntervalMs: 1000,
  staging: { maxPartBytes: 64 * 1024 * 1024, maxPartAgeMs: 5_000 },
});
