import { promises as fsp } from 'node:fs';
import * as lancedb from '@lancedb/lancedb';
import { PROBE_TABLE_PREFIX, StoreProbeError, probeCommitAtomicity } from '../../src/lance/store-probe';
import { tempDir } from '../support/rows';
import { NON_ATOMIC_S3_PORT, NON_ATOMIC_S3_VERSION, s3DatabaseUri, s3LocalSuite } from '../support/s3-local';

const s3 = s3LocalSuite();
const nonAtomic = s3LocalSuite(NON_ATOMIC_S3_PORT, NON_ATOMIC_S3_VERSION);

async function scratchTablesLeft(uri: string, storageOptions?: Record<string, string>): Promise<string[]> {
  const db = await lancedb.connect(uri, storageOptions ? { storageOptions } : {});
  try {
    return (await db.tableNames()).filter((t) => t.startsWith(PROBE_TABLE_PREFIX));
  } finally {
    db.close();
  }
}

test('a local directory commits concurrent appends atomically: every round keeps every row', async () => {
  const dir = await tempDir('kl-store-probe');
  try {
    const verdict = await probeCommitAtomicity({ uri: dir, concurrency: 4, rowsPerWriter: 200, rounds: 3 });
    expect(verdict.atomic).toBe(true);
    expect(verdict.rounds).toHaveLength(3);
    expect(verdict.foundRows).toBe(verdict.expectedRows);
    expect(verdict.expectedRows).toBe(3 * 5 * 200);
    expect(await scratchTablesLeft(dir)).toEqual([]);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
});

test('s3proxy 4.0.0 (If-None-Match atomic) keeps every racing commit: the probe says atomic after every round', async () => {
  const uri = s3DatabaseUri('probe');
  const verdict = await probeCommitAtomicity({ uri, storageOptions: s3.storageOptions });
  expect(verdict.atomic).toBe(true);
  expect(verdict.rounds).toHaveLength(3);
  // A rejected add may still have committed (its rows are not expected, and may be found).
  for (const round of verdict.rounds) expect(round.foundRows).toBeGreaterThanOrEqual(round.expectedRows);
  expect(await scratchTablesLeft(uri, s3.storageOptions)).toEqual([]);
});

test('s3proxy 2.6.0 (If-None-Match ignored) loses racing commits: the probe says not atomic', async () => {
  const uri = s3DatabaseUri('probe');
  const verdict = await probeCommitAtomicity({ uri, storageOptions: nonAtomic.storageOptions });
  expect(verdict.atomic).toBe(false);
  expect(verdict.foundRows).toBeLessThan(verdict.expectedRows);
  // The first lossy round ends the probe.
  const last = verdict.rounds[verdict.rounds.length - 1]!;
  expect(last.foundRows).toBeLessThan(last.expectedRows);
  expect(await scratchTablesLeft(uri, nonAtomic.storageOptions)).toEqual([]);
});

test('an unreachable store fails the probe with a typed error naming the step, never the secret', async () => {
  const secret = 'never-in-an-error-0d1e';
  const probe = probeCommitAtomicity({
    uri: s3DatabaseUri('unreachable'),
    storageOptions: {
      ...s3.storageOptions,
      endpoint: 'http://127.0.0.1:9',
      aws_secret_access_key: secret,
      client_max_retries: '0',
      client_retry_timeout: '1',
    },
  });
  const error: unknown = await probe.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StoreProbeError);
  const probeError = error as StoreProbeError;
  expect([probeError.code, probeError.step, probeError.retriable]).toEqual([
    'LANCE_WRITE_FAILED',
    'connect',
    true,
  ]);
  expect(probeError.context.storageOptionKeys).toContain('aws_secret_access_key');
  expect(
    `${probeError.message} ${JSON.stringify(probeError.context)} ${String(probeError.cause)}`,
  ).not.toContain(secret);
});
