import { z } from 'zod';
import { secretBytes, secretPem, secretString } from './secret';

/**
 * How kafka-lance's kafkajs clients reach the brokers: TLS (`ssl`, node:tls options) and
 * SASL (`sasl`, kafkajs's mechanisms). Every value that can be a secret takes a reference
 * (`${env:NAME}` or `{ file }`, secret.ts), and every field of both is redacted wherever
 * it could be shown (src/common/redaction.ts), not only the ones named here.
 */

/** PEM text: one, or a list (a CA bundle split in files); a .ts definition may give Buffers. */
const pems = z.union([secretPem(), z.array(secretPem())]);

/** node:tls connect options; the named ones are checked, any other goes to node:tls as given. */
export const tlsOptions = z.looseObject({
  /** The CAs the brokers' certificates must chain to (PEM); absent: the system's. */
  ca: pems.optional(),
  /** The client certificate (mTLS), PEM. */
  cert: pems.optional(),
  /** The client certificate's private key, PEM. */
  key: pems.optional(),
  /** A PKCS#12 bundle of key and certificate (binary: `{ file }` or a Buffer). */
  pfx: secretBytes().optional(),
  /** The password of an encrypted `key` or `pfx`. */
  passphrase: secretString().optional(),
  rejectUnauthorized: z.boolean().optional(),
  servername: z.string().optional(),
});

/**
 * kafkajs's token provider: returns `{ value: <token> }` (a JWT, an AWS MSK IAM token
 * from aws-msk-iam-sasl-signer-js, ...). kafkajs calls it on every connection, so a
 * provider caches its token until shortly before it expires.
 */
export type OAuthBearerProvider = () => Promise<{ value: string }>;

const usernamePassword = {
  username: secretString(z.string().min(1)),
  password: secretString(),
};

export const saslOptions = z.discriminatedUnion('mechanism', [
  z.strictObject({ mechanism: z.literal('plain'), ...usernamePassword }),
  z.strictObject({ mechanism: z.literal('scram-sha-256'), ...usernamePassword }),
  z.strictObject({ mechanism: z.literal('scram-sha-512'), ...usernamePassword }),
  z.strictObject({
    mechanism: z.literal('oauthbearer'),
    oauthBearerProvider: z.custom<OAuthBearerProvider>(
      (v) => typeof v === 'function',
      'a function returning a promise of { value: token }: give it in a .ts or .js definition',
    ),
  }),
  z.strictObject({
    mechanism: z.literal('aws'),
    authorizationIdentity: secretString(),
    accessKeyId: secretString(),
    secretAccessKey: secretString(),
    sessionToken: secretString().optional(),
  }),
]);

export const clientOptions = z
  .strictObject({
    clientId: z.string().optional(),
    /** `true`: TLS with the system's CAs; an object: node:tls options. */
    ssl: z.union([z.boolean(), tlsOptions]).optional(),
    sasl: saslOptions.optional(),
    connectionTimeout: z.number().int().positive().optional(),
    requestTimeout: z.number().int().positive().optional(),
  })
  .default({});
