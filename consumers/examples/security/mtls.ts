import { defineConsumer } from 'kafka-lance';

/**
 * Mutual TLS: the broker's SSL listener requires a client certificate
 * (`ssl.client.auth=required`); the principal is the certificate's subject. The key and
 * certificate are checked when the replica starts: a malformed one, a key that is not the
 * certificate's, or an expired certificate stops the start (exit code 2) naming the option.
 */
export default defineConsumer({
  name: 'app-logs-mtls',
  brokers: ['kafka-0.kafka:9094'],
  topics: ['app-logs'],
  schema: 'infer',
  client: {
    ssl: {
      ca: { file: 'tls/ca.crt' },
      cert: { file: 'tls/client.crt' },
      key: { file: 'tls/client.key' },
    },
  },
});
