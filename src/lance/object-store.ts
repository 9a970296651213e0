import * as lancedb from '@lancedb/lancedb';
import { errorMessage } from '../common/errors';

/**
 * Object-store settings of a Lance database: what can be checked before anything
 * connects (field-named problems), and one bounded round trip at start so that a
 * wrong endpoint, wrong credentials or a missing bucket stop the replica within
 * seconds with a message naming the cause, instead of surfacing as publications
 * that LanceDB retries for minutes (its default retry budget is 180 s per request).
 */

/** URI schemes LanceDB 0.39 opens through its object store layer. */
export const OBJECT_STORE_SCHEMES = ['s3', 's3+ddb', 'gs', 'az', 'abfs', 'memory', 'file'] as const;

export interface ConfigProblem {
  readonly field: string;
  readonly message: string;
}

/** The scheme of `uri` when it has one (`s3://b/p` → `s3`), else undefined (a local path). */
export function uriScheme(uri: string): string | undefined {
  const m = /^([a-z][a-z0-9+.-]*):\/\//i.exec(uri);
  return m ? m[1]!.toLowerCase() : undefined;
}

/** A remote store: anything but a local path or file://. */
export function isObjectStoreUri(uri: string): boolean {
  const scheme = uriScheme(uri);
  return scheme !== undefined && scheme !== 'file';
}

/**
 * Option names object_store accepts for the same setting (it lower-cases keys and
 * takes them with or without the `aws_` prefix). Lance also reads the AWS_*
 * environment variables itself (checked: AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_REGION with no storage options reach s3proxy).
 */
const ENDPOINT_KEYS = ['endpoint', 'endpoint_url', 'aws_endpoint', 'aws_endpoint_url'];
const REGION_KEYS = ['region', 'aws_region', 'default_region', 'aws_default_region'];
const KEY_ID_KEYS = ['access_key_id', 'aws_access_key_id'];
const SECRET_KEYS = ['secret_access_key', 'aws_secret_access_key'];
const ENDPOINT_ENV = ['AWS_ENDPOINT_URL', 'AWS_ENDPOINT', 'AWS_ENDPOINT_URL_S3'];
const REGION_ENV = ['AWS_REGION', 'AWS_DEFAULT_REGION'];

function has(options: Readonly<Record<string, string>>, keys: readonly string[]): boolean {
  return Object.entries(options).some(([k, v]) => keys.includes(k.toLowerCase()) && v.length > 0);
}

function hasEnv(env: NodeJS.ProcessEnv, names: readonly string[]): boolean {
  return names.some((n) => (env[n] ?? '').length > 0);
}

/**
 * Problems of an object-store configuration that depend on the environment (the
 * static ones are in the consumer definition's zod schema): an s3:// database needs
 * an endpoint or a region to address the bucket, and credentials given in the
 * options must be whole (a key id without its secret would silently fall back to
 * another identity from the AWS chain).
 */
export function objectStoreProblems(
  uri: string,
  storageOptions: Readonly<Record<string, string>> | undefined,
  env: NodeJS.ProcessEnv,
): ConfigProblem[] {
  const scheme = uriScheme(uri);
  if (scheme !== 's3' && scheme !== 's3+ddb') return [];
  const options = storageOptions ?? {};
  const problems: ConfigProblem[] = [];
  if (!has(options, [...ENDPOINT_KEYS, ...REGION_KEYS]) && !hasEnv(env, [...ENDPOINT_ENV, ...REGION_ENV])) {
    problems.push({
      field: 'lance.storageOptions',
      message: `${uri} needs an endpoint (storageOptions.endpoint or AWS_ENDPOINT_URL, for MinIO/Ceph/s3proxy) or a region (storageOptions.region or AWS_REGION, for AWS S3)`,
    });
  }
  const keyId = has(options, KEY_ID_KEYS);
  const secret = has(options, SECRET_KEYS);
  if (keyId !== secret) {
    problems.push({
      field: `lance.storageOptions.${keyId ? 'aws_secret_access_key' : 'aws_access_key_id'}`,
      message: `missing: credentials in storageOptions need both aws_access_key_id and aws_secret_access_key (or neither: then AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the AWS credential chain)`,
    });
  }
  const endpoint = Object.entries(options).find(([k]) => ENDPOINT_KEYS.includes(k.toLowerCase()))?.[1];
  if (
    endpoint?.startsWith('http://') &&
    !/^true$/i.test(options.allow_http ?? options.aws_allow_http ?? '')
  ) {
    problems.push({
      field: 'lance.storageOptions.allow_http',
      message: `endpoint ${endpoint} is plain HTTP: set allow_http: 'true' (object_store refuses HTTP otherwise)`,
    });
  }
  return problems;
}

/** Option names that hold secrets: their values never reach a log or an error. */
const SECRET_NAME = /secret|token|password|key$|sas|credential/i;

/** storageOptions for logs: every value of a secret-looking option replaced. */
export function redactStorageOptions(
  options: Readonly<Record<string, string>> | undefined,
): Record<string, string> | undefined {
  if (!options) return undefined;
  return Object.fromEntries(
    Object.entries(options).map(([k, v]) => [k, SECRET_NAME.test(k) ? '[redacted]' : v]),
  );
}

/** Why the store could not be reached, as far as its answer tells. */
export type StoreProblem = 'endpoint' | 'credentials' | 'bucket' | 'timeout' | 'other';

export interface StoreCheckResult {
  readonly ok: boolean;
  readonly problem?: StoreProblem;
  /** A sentence naming the problem and the setting to fix (no secret values). */
  readonly message?: string;
  readonly elapsedMs: number;
}

/**
 * Options that bound one attempt: no retries (a wrong setting does not get better
 * by waiting), object_store's connect and request timeouts. The user's own options
 * win for everything else.
 */
const BOUNDED: Readonly<Record<string, string>> = {
  client_max_retries: '0',
  client_retry_timeout: '3',
  connect_timeout: '3s',
  timeout: '5s',
};

/**
 * Connects and lists the database once (LanceDB's connect lists the prefix), bounded
 * by `timeoutMs` also on the JavaScript side should the native call hang. Local paths
 * are not checked (a missing directory is created on first publication).
 */
export async function checkStoreReachable(
  uri: string,
  storageOptions: Readonly<Record<string, string>> | undefined,
  timeoutMs = 10_000,
): Promise<StoreCheckResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  const attempt = (async (): Promise<unknown> => {
    const db = await lancedb.connect(uri, { storageOptions: { ...BOUNDED, ...(storageOptions ?? {}) } });
    try {
      await db.tableNames();
    } finally {
      db.close();
    }
    return undefined;
  })().catch((error: unknown) => error ?? new Error('connect rejected'));
  try {
    const outcome = await Promise.race([attempt, timeout]);
    if (outcome === undefined) return { ok: true, elapsedMs: elapsed() };
    if (outcome === 'timeout') {
      return {
        ok: false,
        problem: 'timeout',
        message: `no answer from the store of ${uri} within ${timeoutMs} ms: check lance.storageOptions.endpoint (or AWS_ENDPOINT_URL) and the network`,
        elapsedMs: elapsed(),
      };
    }
    return { ok: false, ...classifyStoreError(uri, outcome), elapsedMs: elapsed() };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * LanceDB's errors are untyped text (object_store's RetryError with the HTTP status
 * and the S3 error code): this is the one place that reads it.
 */
export function classifyStoreError(uri: string, error: unknown): { problem: StoreProblem; message: string } {
  const text = errorMessage(error);
  const bucket = /^[a-z0-9+]+:\/\/([^/]+)/i.exec(uri)?.[1] ?? uri;
  if (/NoSuchBucket|status: 404[^]*bucket/i.test(text)) {
    return {
      problem: 'bucket',
      message: `bucket "${bucket}" of ${uri} does not exist on the store (S3: NoSuchBucket)`,
    };
  }
  if (
    /SignatureDoesNotMatch|InvalidAccessKeyId|AccessDenied|status: 403|status: 401|ExpiredToken/i.test(text)
  ) {
    const code = /<Code>([A-Za-z]+)<\/Code>/.exec(text)?.[1] ?? 'HTTP 403';
    return {
      problem: 'credentials',
      message: `the store refused the credentials for ${uri} (${code}): check lance.storageOptions.aws_access_key_id/aws_secret_access_key or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY`,
    };
  }
  if (
    /kind: Connect|ConnectionRefused|dns error|tcp connect error|error sending request|timed out|Timeout/i.test(
      text,
    )
  ) {
    const target = /uri: Some\((https?:\/\/[^/?)]+)/.exec(text)?.[1] ?? 'the endpoint';
    return {
      problem: 'endpoint',
      message: `cannot reach ${target} for ${uri}: check lance.storageOptions.endpoint (or AWS_ENDPOINT_URL) and that the store is running`,
    };
  }
  if (/status: 404/i.test(text)) {
    return {
      problem: 'bucket',
      message: `the store answered 404 for ${uri}: wrong endpoint or missing bucket "${bucket}"`,
    };
  }
  return { problem: 'other', message: `the store of ${uri} failed: ${text.slice(0, 300)}` };
}
