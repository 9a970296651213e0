import { defineConsumer } from 'kafka-lance';

/**
 * SASL SCRAM-SHA-256 over TLS (a SASL_SSL listener). The user and password come from the
 * environment (`${env:NAME}`, for example from a Kubernetes Secret's env), never from
 * this file; they are read at start, and a missing variable stops the start naming the option.
 */
export default defineConsumer({
  name: 'app-logs-scram-sha-256',
  brokers: ['kafka-0.kafka:9095'],
  topics: ['app-logs'],
  schema: 'infer',
  client: {
    ssl: { ca: { file: 'tls/ca.crt' } },
    sasl: {
      mechanism: 'scram-sha-256',
      username: '${env:KAFKA_USERNAME}',
      password: '${env:KAFKA_PASSWORD}',
    },
  },
});
