import { KafkaJSConnectionError, KafkaJSSASLAuthenticationError } from 'kafkajs';

/**
 * A connection the broker refused for its credentials or its TLS, read from kafkajs's
 * errors: what happened and the option that fixes it. Retrying cannot help (the same
 * password, CA or certificate is refused again), so the start stops with exit code 2
 * (src/cli/errors.ts, BrokerAuthenticationError) instead of a restart loop that looks
 * like progress. The texts name options, never their values: every field of client.ssl
 * and client.sasl is a secret (src/common/redaction.ts).
 */
export interface BrokerAuthFailure {
  /** What the broker or the TLS handshake said, in an operator's words. */
  readonly cause: string;
  /** The options to fix. */
  readonly option: string;
}

/** Node's verification codes for a broker certificate that does not chain to a trusted CA. */
const UNTRUSTED_SERVER_CERTIFICATE: ReadonlySet<string> = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
]);

/** TLS alerts a broker sends when it refuses the client's certificate (or its absence). */
const REFUSED_CLIENT_CERTIFICATE: ReadonlySet<string> = new Set([
  'ERR_SSL_SSL/TLS_ALERT_CERTIFICATE_UNKNOWN',
  'ERR_SSL_SSL/TLS_ALERT_BAD_CERTIFICATE',
  'ERR_SSL_SSL/TLS_ALERT_CERTIFICATE_EXPIRED',
  'ERR_SSL_SSL/TLS_ALERT_CERTIFICATE_REQUIRED',
  'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
  'ERR_SSL_SSL/TLS_ALERT_UNKNOWN_CA',
]);

/** How a TLS client meets a listener that does not speak TLS: the socket closes mid-handshake. */
const NOT_TLS = 'before secure TLS connection was established';

export function brokerAuthFailureOf(error: unknown, tls: boolean): BrokerAuthFailure | undefined {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 6; e = e.cause, depth++) {
    if (e instanceof KafkaJSSASLAuthenticationError) {
      return {
        // kafkajs's message carries the broker's answer ("… invalid credentials …"), never the password.
        cause: `the broker refused the SASL credentials (${e.message})`,
        option: 'client.sasl.username and client.sasl.password (or the token provider)',
      };
    }
    if (!(e instanceof KafkaJSConnectionError)) continue;
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && UNTRUSTED_SERVER_CERTIFICATE.has(code))
      return {
        cause: `the broker's certificate is not signed by a trusted CA (${code})`,
        option: 'client.ssl.ca (the CA that signed the broker certificate)',
      };
    if (code === 'CERT_HAS_EXPIRED')
      return {
        cause: "the broker's certificate has expired (CERT_HAS_EXPIRED)",
        option: 'the broker certificate',
      };
    if (code === 'ERR_TLS_CERT_ALTNAME_INVALID')
      return {
        cause: "the broker's certificate does not name the host connected to (ERR_TLS_CERT_ALTNAME_INVALID)",
        option: 'brokers, or client.ssl.servername',
      };
    if (typeof code === 'string' && REFUSED_CLIENT_CERTIFICATE.has(code))
      return {
        cause: `the broker refused the client certificate (TLS alert ${code.replace(/^ERR_SSL_/, '')}: expired, missing, or not signed by a CA the broker trusts)`,
        option: 'client.ssl.cert and client.ssl.key',
      };
    if (tls && e.message.includes(NOT_TLS))
      return {
        cause:
          'the broker closed the connection during the TLS handshake: the listener at that address does not speak TLS',
        option: "brokers (the TLS listener's address) or client.ssl (remove it for a PLAINTEXT listener)",
      };
  }
  return undefined;
}
