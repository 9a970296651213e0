import { X509Certificate, createPrivateKey } from 'node:crypto';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import { errorMessage } from '../common/errors';

/**
 * Key and certificate material read at start, so that a malformed key, a certificate
 * that is not PEM, a key that is not the certificate's or a client certificate that has
 * expired stops the start naming its option (exit 2), instead of failing inside a
 * connection later (kafkajs restarts its consumer on it; the registry client retries it
 * as an outage). Messages name the option and node's reason, never the material.
 */

type Material = string | Buffer | readonly (string | Buffer)[];

export interface TlsMaterial {
  readonly ca?: Material;
  readonly cert?: Material;
  readonly key?: Material;
  readonly pfx?: string | Buffer;
  readonly passphrase?: string;
}

export interface TlsProblem {
  readonly field: string;
  readonly message: string;
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

export function tlsMaterialProblems(tls: TlsMaterial, at: string, now: Date = new Date()): TlsProblem[] {
  const problems: TlsProblem[] = [];
  const list = (m: Material | undefined): readonly (string | Buffer)[] =>
    m === undefined ? [] : typeof m === 'string' || Buffer.isBuffer(m) ? [m] : m;
  for (const name of ['ca', 'cert'] as const) {
    for (const pem of list(tls[name])) {
      const blocks = pem.toString('utf8').match(PEM_CERTIFICATE) ?? [];
      if (blocks.length === 0) {
        problems.push({
          field: `${at}.${name}`,
          message: 'holds no PEM certificate (-----BEGIN CERTIFICATE-----)',
        });
        continue;
      }
      for (const block of blocks) {
        let certificate: X509Certificate;
        try {
          certificate = new X509Certificate(block);
        } catch (error) {
          problems.push({
            field: `${at}.${name}`,
            message: `a certificate cannot be read: ${errorMessage(error)}`,
          });
          continue;
        }
        // The broker refuses an expired client certificate with a bare TLS alert; say it here.
        if (name === 'cert' && new Date(certificate.validTo) < now)
          problems.push({
            field: `${at}.cert`,
            message: `the certificate expired on ${certificate.validTo}`,
          });
      }
    }
  }
  for (const key of list(tls.key)) {
    try {
      createPrivateKey({ key, ...(tls.passphrase !== undefined ? { passphrase: tls.passphrase } : {}) });
    } catch (error) {
      problems.push({
        field: `${at}.key`,
        message: `not a private key node can read: ${errorMessage(error)}`,
      });
    }
  }
  if (problems.length > 0) return problems;
  // Together: a key that is not the certificate's, a pfx or its passphrase.
  try {
    createSecureContext(secureContextOptions(tls));
  } catch (error) {
    const field = tls.pfx !== undefined ? `${at}.pfx` : `${at}.key`;
    problems.push({ field, message: `TLS cannot use it: ${errorMessage(error)}` });
  }
  return problems;
}

function secureContextOptions(tls: TlsMaterial): SecureContextOptions {
  const options: SecureContextOptions = {};
  if (tls.ca !== undefined) options.ca = tls.ca as SecureContextOptions['ca'];
  if (tls.cert !== undefined) options.cert = tls.cert as SecureContextOptions['cert'];
  if (tls.key !== undefined) options.key = tls.key as SecureContextOptions['key'];
  if (tls.pfx !== undefined) options.pfx = tls.pfx;
  if (tls.passphrase !== undefined) options.passphrase = tls.passphrase;
  return options;
}
