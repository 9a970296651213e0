import * as path from 'node:path';
import { ulid } from 'ulid';
import { leasedLocalServer } from './leased-local-server';
import { runBounded } from './run-bounded';

/** The port of the S3 server the suites start (away from a demo server on 9000). */
export const TEST_S3_PORT = Number(process.env.S3_TEST_PORT ?? 19900);
export const S3_BUCKET = process.env.S3_LOCAL_BUCKET ?? 'kafka-lance';
/** The fixed local credentials of deploy/s3-local (overridable there by the same variables). */
export const S3_ACCESS_KEY_ID = process.env.S3_LOCAL_ACCESS_KEY_ID ?? 'kafka-lance';
const S3_SECRET_ACCESS_KEY = process.env.S3_LOCAL_SECRET_ACCESS_KEY ?? 'kafka-lance-secret';
export const S3_REGION = 'us-east-1';
/**
 * s3proxy 4.0.0 (deploy/s3-local's default) honours If-None-Match atomically: a store
 * with conditional writes. 2.6.0 ignores it: the store without them, on a port of its own.
 */
export const ATOMIC_S3_VERSION = '4.0.0';
export const NON_ATOMIC_S3_VERSION = '2.6.0';
export const NON_ATOMIC_S3_PORT = TEST_S3_PORT + 4;

const DEPLOY = path.resolve(__dirname, '../../deploy/s3-local');
const SCRIPT = path.join(DEPLOY, 's3-local');

export function s3Local(
  command: 'start' | 'stop' | 'status' | 'reset',
  port = TEST_S3_PORT,
  version = ATOMIC_S3_VERSION,
): { code: number; output: string } {
  const result = runBounded(SCRIPT, [command], { env: { ...process.env, ...s3LocalEnv(port, version) } });
  return { code: result.status ?? 1, output: `${result.stdout}${result.stderr}`.trim() };
}

const s3LocalEnv = (port: number, version: string) => ({
  S3_LOCAL_PORT: String(port),
  S3_LOCAL_VERSION: version,
});

export function s3Endpoint(port = TEST_S3_PORT): string {
  return `http://127.0.0.1:${port}`;
}

/** What `lancedb.connect(uri, { storageOptions })` needs to reach the local server. */
export function storageOptions(port = TEST_S3_PORT): Record<string, string> {
  return {
    endpoint: s3Endpoint(port),
    aws_access_key_id: S3_ACCESS_KEY_ID,
    aws_secret_access_key: S3_SECRET_ACCESS_KEY,
    region: S3_REGION,
    allow_http: 'true',
  };
}

/** A database URI of its own in the test bucket: `s3://<bucket>/<prefix>-<ulid>`. */
export function s3DatabaseUri(prefix = 'db'): string {
  return `s3://${S3_BUCKET}/${prefix}-${ulid().toLowerCase()}`;
}

/**
 * Starts the local S3 server for a suite unless it already runs, and stops it after
 * the suite only if a suite started it and no other suite still uses it
 * (`leasedLocalServer`).
 */
export function s3LocalSuite(
  port = TEST_S3_PORT,
  version = ATOMIC_S3_VERSION,
): { readonly storageOptions: Record<string, string> } {
  leasedLocalServer({
    work: path.join(process.env.S3_LOCAL_HOME ?? path.join(DEPLOY, '.cache'), `s3-${port}`),
    label: `the local S3 server (s3proxy ${version})`,
    run: (command) => {
      if (command !== 'status') return s3Local(command, port, version);
      const status = s3Local('status', port, version);
      if (status.code !== 0) return status;
      // Running: `start` only checks that it is this version (and the bucket there); a
      // refusal reads as not running, and the start that follows says why.
      return s3Local('start', port, version).code === 0 ? status : { code: 3, output: '' };
    },
    stopCommand: { script: SCRIPT, env: s3LocalEnv(port, version) },
  });
  return { storageOptions: storageOptions(port) };
}
