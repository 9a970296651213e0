import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { errorMessage } from '../common/errors';

/**
 * Secret-bearing options name their value by reference, so a definition can be committed
 * and a secret kept in a mounted file or the environment:
 *
 *   password: '${env:KAFKA_PASSWORD}'          (any `${env:NAME}` inside a string)
 *   key: { file: '/var/run/secrets/client.key' }  (the file's text, as is)
 *
 * An inline string without a reference stays the value. References are resolved once,
 * at start (resolve.ts), and a missing variable or unreadable file is a configuration
 * error naming the option, so nothing connects with an empty password.
 */

/** A reference not yet resolved: the schema's output, replaced by its text in resolve.ts. */
export class SecretReference {
  constructor(
    /** `${env:…}` text, or a file path. */
    readonly reference: { readonly template: string } | { readonly file: string },
  ) {}
}

/** A file reference whose bytes are the value (a PKCS#12 `pfx` is binary, not text). */
export class SecretBytesReference {
  constructor(readonly file: string) {}
}

const ENV_REFERENCE = /\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g;

/**
 * Every schema of a secret-bearing option, so that a test can find them all from the
 * definition's schema (a new secret option is covered without editing the test) and
 * redaction can be checked to cover each one.
 */
export const secretSchemas = z.registry<{ readonly secret: true }>();

/** A secret string option: inline text, `${env:NAME}` references in it, or `{ file }`. */
export function secretString(inner: z.ZodString = z.string()) {
  const schema = z
    .union([inner, z.strictObject({ file: z.string().min(1) })])
    .transform((value): string | SecretReference => {
      if (typeof value !== 'string') return new SecretReference({ file: value.file });
      return value.includes('${env:') ? new SecretReference({ template: value }) : value;
    });
  secretSchemas.add(schema, { secret: true });
  return schema;
}

/**
 * A PEM secret (`ssl.ca`, `cert`, `key`): text, a reference, or a Buffer that a .ts
 * definition read itself.
 */
export function secretPem() {
  const schema = z
    .union([z.string(), z.instanceof(Buffer), z.strictObject({ file: z.string().min(1) })])
    .transform((value): string | Buffer | SecretReference => {
      if (Buffer.isBuffer(value)) return value;
      if (typeof value !== 'string') return new SecretReference({ file: value.file });
      return value.includes('${env:') ? new SecretReference({ template: value }) : value;
    });
  secretSchemas.add(schema, { secret: true });
  return schema;
}

/** A binary secret option (`ssl.pfx`): bytes given inline (a .ts definition's Buffer) or `{ file }`. */
export function secretBytes() {
  const schema = z
    .union([z.instanceof(Buffer), z.string(), z.strictObject({ file: z.string().min(1) })])
    .transform((value): string | Buffer | SecretBytesReference => {
      if (Buffer.isBuffer(value) || typeof value === 'string') return value;
      return new SecretBytesReference(value.file);
    });
  secretSchemas.add(schema, { secret: true });
  return schema;
}

/** A schema's output with every secret reference replaced by its text. */
export type WithSecretsResolved<T> = T extends SecretReference
  ? string
  : T extends SecretBytesReference
    ? Buffer
    : T extends Buffer
      ? Buffer
      : T extends (...args: never[]) => unknown
        ? T
        : T extends readonly (infer U)[]
          ? WithSecretsResolved<U>[]
          : T extends object
            ? { [K in keyof T]: WithSecretsResolved<T[K]> }
            : T;

/** A reference that cannot be read: the option it names and why. */
export interface SecretProblem {
  readonly field: string;
  readonly message: string;
}

/**
 * Replaces every SecretReference in `value` (walked as plain data; functions and class
 * instances other than references are kept) with its text. Relative files are read
 * from `baseDir` (the definition's folder). Problems are collected, not thrown one by
 * one, so the operator sees every missing secret at once.
 */
export function resolveSecrets<T>(
  value: T,
  env: NodeJS.ProcessEnv,
  baseDir: string,
  problems: SecretProblem[],
  at: readonly string[] = [],
): WithSecretsResolved<T> {
  if (value instanceof SecretReference)
    return readReference(value, env, baseDir, at.join('.'), problems) as WithSecretsResolved<T>;
  if (value instanceof SecretBytesReference)
    return readSecretFile(value.file, baseDir, at.join('.'), problems) as WithSecretsResolved<T>;
  if (Array.isArray(value))
    return value.map((item, i) =>
      resolveSecrets(item as unknown, env, baseDir, problems, [...at, String(i)]),
    ) as WithSecretsResolved<T>;
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(value))
      out[key] = resolveSecrets(child as unknown, env, baseDir, problems, [...at, key]);
    return out as WithSecretsResolved<T>;
  }
  return value as WithSecretsResolved<T>;
}

function readReference(
  secret: SecretReference,
  env: NodeJS.ProcessEnv,
  baseDir: string,
  field: string,
  problems: SecretProblem[],
): string {
  const ref = secret.reference;
  if ('file' in ref) return readSecretFile(ref.file, baseDir, field, problems).toString('utf8');
  return ref.template.replace(ENV_REFERENCE, (_whole, name: string) => {
    const text = env[name];
    if (text === undefined) {
      problems.push({ field, message: `the environment variable ${name} is not set` });
      return '';
    }
    return text;
  });
}

function readSecretFile(file: string, baseDir: string, field: string, problems: SecretProblem[]): Buffer {
  const absolute = path.resolve(baseDir, file);
  try {
    return readFileSync(absolute);
  } catch (error) {
    // The error's code and the path only, never the file's content.
    const code = (error as NodeJS.ErrnoException).code ?? errorMessage(error);
    problems.push({ field, message: `cannot read the secret file ${absolute} (${code})` });
    return Buffer.alloc(0);
  }
}
