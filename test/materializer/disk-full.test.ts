/**
 * A Lance add that meets a full disk is a
 * transient 'disk-full' failure, retried within seconds and never set aside (before,
 * nothing named it: it counted as 'storage', with backoff up to 30 s and no pause).
 */
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { DiskFullError, PartCorruptError } from '../../src/common/errors';
import { LanceWriteError } from '../../src/lance/lance-errors';
import { DISK_FULL_RETRY_CAP_MS, FailurePolicy, classifyFailure } from '../../src/materializer/failure';
import {
  TABLE,
  expectExactly,
  ledgerFiles,
  openMaterializer,
  ownershipOf,
  readLance,
  stageRows,
} from '../support/materializer-fixture';
import { tempDir } from '../support/rows';
import { smallFs } from '../support/small-fs';

test('a full disk is classified disk-full, transient, retried at least every 5 s, whatever wraps it', () => {
  const enospc = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
  const wrapped = new LanceWriteError(
    'add failed',
    new DiskFullError('lance', '/t', 'add', 'os error 28'),
    true,
    't',
  );
  for (const error of [enospc, wrapped, new PartCorruptError('/p', 'read failed', enospc)]) {
    expect(classifyFailure(error)).toMatchObject({ reason: 'disk-full', permanent: false });
  }
  const policy = new FailurePolicy(1);
  let verdict = policy.failed('p', classifyFailure(enospc), 0);
  for (let i = 0; i < 20; i++) verdict = policy.failed('p', classifyFailure(enospc), 0);
  expect(verdict).toEqual({ action: 'retry', attempts: 21, retryInMs: DISK_FULL_RETRY_CAP_MS });
});

describe.each(['tmpfs', 'injection'] as const)('a full Lance directory (%s)', (method) => {
  let dir: string;
  afterEach(async () => {
    await fsp.rm(dir, { recursive: true, force: true });
  });

  test('the publication fails as disk-full (stats say where), is never quarantined, and publishes exactly once when space returns', async () => {
    dir = await tempDir('kl-lance-full');
    const fs = await smallFs(dir, 'lance', 8 * 1024 * 1024, { forceInjection: method === 'injection' });
    try {
      const tableDir = path.join(dir, 'staging', TABLE);
      const lanceDir = path.join(fs.dir, 'lance');
      await stageRows(tableDir, { partitions: 2, perPartition: 100, rowsPerPart: 100 });
      const m = await openMaterializer(tableDir, lanceDir, { maxPermanentFailures: 1 });
      m.setOwnership(ownershipOf(2, [{ owner: 'A', epoch: 1, start: 0 }], 200));
      expect((await m.runOnce()).length).toBeGreaterThan(0);
      await fs.fill();
      await stageRows(tableDir, { partitions: 2, perPartition: 100, rowsPerPart: 100, from: 100 });
      let now = Date.now();
      for (let i = 0; i < 4; i++) {
        expect(await m.runOnce(now)).toEqual([]);
        now += 60_000;
      }
      const stats = m.stats();
      expect(stats.failures['disk-full']).toBeGreaterThanOrEqual(4);
      expect(stats.diskFull).toMatchObject({ stage: 'lance', operation: 'add' });
      expect(stats.quarantinedParts).toEqual({});
      expect(await fsp.readdir(path.join(tableDir, 'quarantine')).catch(() => [])).toEqual([]);
      await fs.free();
      expect((await m.runOnce(now)).length).toBeGreaterThan(0);
      expect(m.stats().diskFull).toBeUndefined();
      expectExactly(await readLance(lanceDir), 2, () => 200);
      expect(await ledgerFiles(tableDir)).toEqual([]);
    } finally {
      await fs.dispose();
    }
  });
});
