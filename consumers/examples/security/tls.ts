import { defineConsumer } from 'kafka-lance';

/**
 * TLS with a private CA (a broker's SSL listener without client certificates, or any
 * TLS listener whose certificate a public CA did not sign). `{ file }` is read at start;
 * a relative path is read from this file's folder (a mounted Secret, for example).
 */
export default defineConsumer({
  name: 'app-logs-tls',
  brokers: ['kafka-0.kafka:9093'],
  topics: ['app-logs'],
  schema: 'infer',
  client: {
    ssl: { ca: { file: 'tls/ca.crt' } },
  },
});
