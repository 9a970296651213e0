import { defineConsumer } from 'kafka-lance';

/**
 * SASL OAUTHBEARER over TLS with a token provider: kafkajs calls `oauthBearerProvider`
 * for every new connection, so a provider caches its token until shortly before it
 * expires. This one makes an *unsecured* JWT (`alg: none`), which only a broker using
 * Kafka's unsecured validator (OAuthBearerUnsecuredValidatorCallbackHandler, test
 * brokers such as deploy/kafka-local's secured mode) accepts; a real provider fetches a
 * signed token from the identity provider (client credentials), or, on AWS MSK, signs
 * one with aws-msk-iam-sasl-signer-js (docs/security.md).
 */
const LIFETIME_S = 3600;
let cached: { value: string; expiresAtMs: number } | undefined;

function unsecuredJwt(subject: string, nowS: number): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({ alg: 'none' })}.${part({ sub: subject, iat: nowS, exp: nowS + LIFETIME_S })}.`;
}

export default defineConsumer({
  name: 'app-logs-oauthbearer',
  brokers: ['kafka-0.kafka:9095'],
  topics: ['app-logs'],
  schema: 'infer',
  client: {
    ssl: { ca: { file: 'tls/ca.crt' } },
    sasl: {
      mechanism: 'oauthbearer',
      oauthBearerProvider: () => {
        const nowMs = Date.now();
        // Renewed a minute before it expires: a connection made with a stale token is refused.
        if (!cached || cached.expiresAtMs - 60_000 < nowMs) {
          const nowS = Math.floor(nowMs / 1000);
          cached = {
            value: unsecuredJwt(process.env.KAFKA_OAUTH_SUBJECT ?? 'kafka-lance', nowS),
            expiresAtMs: (nowS + LIFETIME_S) * 1000,
          };
        }
        return Promise.resolve({ value: cached.value });
      },
    },
  },
});
