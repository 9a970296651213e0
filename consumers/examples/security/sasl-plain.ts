import { defineConsumer } from 'kafka-lance';

/**
 * SASL PLAIN over TLS (PLAIN sends the password itself: only ever over TLS) (a SASL_SSL listener). The user and password come from the
 * environment (`${env:NAME}`, for example from a Kubernetes Secret's env), never from
 * this file; they are read at start, and a missing variable stops the start naming the option.
 */
export default defineConsumer({
  name: 'app-logs-plain',
  brokers: ['kafka-0.kafka:9095'],
  topics: ['app-logs'],
  schema: 'infer',
  client: {
    ssl: { ca: { file: 'tls/ca.crt' } },
    sasl: {
      mechanism: 'plain',
      username: '${env:KAFKA_USERNAME}',
      password: '${env:KAFKA_PASSWORD}',
    },
  },
});
