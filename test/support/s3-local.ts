import { spawnSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { ulid } from 'ulid';

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
export const NON_ATOMIC_S3_PORT = TEST_S3_PORT + 2;

const DEPLOY = path.resolve(__dirname, '../../deploy/s3-local');
const SCRIPT = path.join(DEPLOY, 's3-local');

export function s3Local(
  command: 'start' | 'stop' | 'status' | 'reset',
  port = TEST_S3_PORT,
  version = ATOMIC_S3_VERSION,
): { code: number; output: string } {
  const result = spawnSync(SCRIPT, [command], {
    env: { ...process.env, S3_LOCAL_PORT: String(port), S3_LOCAL_VERSION: version },
    encoding: 'utf8',
  });
  return { code: result.status ?? 1, output: `${result.stdout}${result.stderr}`.trim() };
}

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
 * the suite only if a suite started it and no other suite still uses it. Suites run
 * in parallel jest workers (separate processes), so the bookkeeping is on disk, next
 * to the server's data: one lease file per suite, changed under a mkdir lock.
 */
export function s3LocalSuite(
  port = TEST_S3_PORT,
  version = ATOMIC_S3_VERSION,
): { readonly storageOptions: Record<string, string> } {
  const work = path.join(process.env.S3_LOCAL_HOME ?? path.join(DEPLOY, '.cache'), `s3-${port}`);
  const leases = path.join(work, 'jest-leases');
  const startedMarker = path.join(leases, 'started-by-jest');
  const lease = path.join(leases, `${process.pid}-${ulid()}.lease`);

  beforeAll(async () => {
    await fsp.mkdir(leases, { recursive: true });
    await withLock(leases, async () => {
      await fsp.writeFile(lease, String(process.pid));
      if (s3Local('status', port, version).code === 0) {
        // Running: start only checks that it is this version (and the bucket there).
        const running = s3Local('start', port, version);
        if (running.code !== 0) throw new Error(`the local S3 server is not usable:\n${running.output}`);
        return;
      }
      const started = s3Local('start', port, version);
      if (started.code !== 0) throw new Error(`could not start the local S3 server:\n${started.output}`);
      await fsp.writeFile(startedMarker, String(process.pid));
    });
  }, 180_000);

  afterAll(async () => {
    await withLock(leases, async () => {
      await fsp.rm(lease, { force: true });
      if (await othersHoldLeases(leases)) return;
      if (!(await exists(startedMarker))) return;
      const stopped = s3Local('stop', port, version);
      if (stopped.code !== 0) throw new Error(`could not stop the local S3 server:\n${stopped.output}`);
      await fsp.rm(startedMarker, { force: true });
    });
  }, 60_000);

  return { storageOptions: storageOptions(port) };
}

/** Leases of live processes; a lease whose process died (a killed jest worker) is pruned. */
async function othersHoldLeases(dir: string): Promise<boolean> {
  let live = false;
  for (const name of await fsp.readdir(dir)) {
    if (!name.endsWith('.lease')) continue;
    const pid = Number(name.split('-')[0]);
    if (processAlive(pid)) live = true;
    else await fsp.rm(path.join(dir, name), { force: true });
  }
  return live;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function withLock<T>(dir: string, fn: () => Promise<T>): Promise<T> {
  const lock = path.join(dir, 'lock');
  for (let attempt = 0; ; attempt++) {
    try {
      await fsp.mkdir(lock);
      await fsp.writeFile(path.join(lock, 'owner'), String(process.pid));
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      // A lock left by a killed worker would block every later suite: take it over.
      const owner = Number(await fsp.readFile(path.join(lock, 'owner'), 'utf8').catch(() => '0'));
      if (owner > 0 && !processAlive(owner)) await fsp.rm(lock, { recursive: true, force: true });
      else if (attempt > 1_800) throw new Error(`${lock} held by pid ${owner} for over 3 minutes`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  try {
    return await fn();
  } finally {
    await fsp.rm(lock, { recursive: true, force: true });
  }
}

async function exists(file: string): Promise<boolean> {
  return fsp.access(file).then(
    () => true,
    () => false,
  );
}
