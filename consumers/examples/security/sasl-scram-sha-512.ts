import { defineConsumer } from 'kafka-lance';

/**
 * SASL SCRAM-SHA-512 over TLS (a SASL_SSL listener). The user comes from the environment
 * (`${env:NAME}`), the password from a mounted file (`{ file }`), never from this file; they are read at start, and a missing variable stops the start naming the option.
 */
export default defineConsumer({
  name: 'app-logs-scram-sha-512',
  brokers: ['kafka-0.kafka:9095'],
  topics: ['app-logs'],
  schema: 'infer',
  client: {
    ssl: { ca: { file: 'tls/ca.crt' } },
    sasl: {
      mechanism: 'scram-sha-512',
      username: '${env:KAFKA_USERNAME}',
      // A mounted file works as well as the environment: its whole content is the password.
      password: { file: 'secrets/kafka-password' },
    },
  },
});
