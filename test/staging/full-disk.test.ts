/**
 * A full staging file system pauses staging, never kills it. Each
 * test runs on a real small tmpfs where this process may mount one, and otherwise on
 * the ENOSPC fault injection (the test names say which).
 */
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { DiskFullError } from '../../src/common/errors';
import { recordOffset, tpKey } from '../../src/common/offsets';
import { FileLocks, recoverTableStaging } from '../../src/staging';
import { silentLogger } from '../../src/common/logger';
import { MINUTE, openStaging, partFiles, range, readSealedRows, rowsFor, tempDir } from '../support/rows';
import { canMountTmpfs, smallFs, type SmallFs } from '../support/small-fs';

const T = 'orders';
/** A payload of ~2 KiB per row: a few hundred rows outgrow what the filler leaves. */
const bigPayload = (topic: string, partition: number, offset: number) =>
  `${topic}/${partition}/${offset}:` + 'x'.repeat(2_000);

let parent: string;
let fs: SmallFs;

const push = (h: Awaited<ReturnType<typeof openStaging>>, offsets: number[]) =>
  h.staging.push({
    topic: T,
    partition: 0,
    batch: rowsFor(T, 0, offsets, bigPayload),
    minute: MINUTE,
    handledThrough: recordOffset(offsets[offsets.length - 1]!),
  });

// The injection always runs (it is what CI without CAP_SYS_ADMIN gets); tmpfs where it can.
describe.each(['tmpfs', 'injection'] as const)('full staging disk (%s)', (method) => {
  beforeEach(async () => {
    parent = await tempDir('kl-full-disk');
    const mountable = await canMountTmpfs(parent);
    fs = await smallFs(parent, 'staging', 4 * 1024 * 1024, { forceInjection: method === 'injection' });
    if (method === 'tmpfs' && !mountable) console.warn('no CAP_SYS_ADMIN: the tmpfs case ran on injection');
  });
  afterEach(async () => {
    await fs.dispose();
    await fsp.rm(parent, { recursive: true, force: true });
  });

  test('a sync that meets ENOSPC rejects with DiskFullError, reports nothing new durable, and succeeds once space returns', async () => {
    const tableDir = path.join(fs.dir, 'staging', 'events');
    const h = await openStaging(tableDir);
    push(h, range(0, 100));
    expect((await h.staging.sync()).get(tpKey(T, 0))).toBe(99);
    await fs.fill();
    push(h, range(100, 600));
    const failure = await h.staging.sync().catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(DiskFullError);
    expect(failure).toMatchObject({ stage: 'staging', retriable: true });
    expect(h.staging.durableOffsets().get(tpKey(T, 0))).toBe(99);
    // Still full: the retry fails the same way, and staging stays usable (pushes are kept).
    await expect(h.staging.sync()).rejects.toBeInstanceOf(DiskFullError);
    push(h, range(600, 650));
    await fs.free();
    expect((await h.staging.sync()).get(tpKey(T, 0))).toBe(649);
    await h.staging.close();
    const rows = await readSealedRows(tableDir);
    expect(rows.map((r) => r.offset)).toEqual(range(0, 650));
    expect(rows[400]!.message).toBe(bigPayload(T, 0, 400));
  });

  test('a seal (flush) that meets ENOSPC is retried by the next flush and the part is whole', async () => {
    const tableDir = path.join(fs.dir, 'staging', 'events');
    const h = await openStaging(tableDir);
    push(h, range(0, 50));
    await h.staging.sync();
    await fs.fill();
    push(h, range(50, 500));
    await expect(h.staging.flush({ force: true })).rejects.toBeInstanceOf(DiskFullError);
    expect(await partFiles(tableDir, 'sealed')).toHaveLength(0);
    await fs.free();
    const { sealed } = await h.staging.flush({ force: true });
    expect(sealed.map((p) => p.rows)).toEqual([500]);
    expect((await h.staging.sync()).get(tpKey(T, 0))).toBe(499);
    expect((await readSealedRows(tableDir)).map((r) => r.offset)).toEqual(range(0, 500));
  });

  test('a torn tail written before ENOSPC is dropped by recovery like a crash tail (its offsets were never durable)', async () => {
    const tableDir = path.join(fs.dir, 'staging', 'events');
    const h = await openStaging(tableDir);
    push(h, range(0, 100));
    expect((await h.staging.sync()).get(tpKey(T, 0))).toBe(99);
    await fs.fill();
    push(h, range(100, 600));
    await expect(h.staging.sync()).rejects.toBeInstanceOf(DiskFullError);
    // The process dies here (nothing more is written); space comes back; a restart recovers.
    await fs.free();
    const report = await recoverTableStaging({
      tableDir,
      locks: new FileLocks(),
      owner: 'recovery',
      logger: silentLogger(),
    });
    expect(report.quarantined).toEqual([]);
    const offsets = (await readSealedRows(tableDir)).map((r) => r.offset);
    // Whole batches only: at least everything durable, never a torn row.
    expect(offsets.slice(0, 100)).toEqual(range(0, 100));
    expect(offsets).toEqual(range(0, offsets.length));
    if (fs.method === 'tmpfs') expect(report.tornParts).toBe(1);
  });
});

describe('full staging disk during a rebalance (injection)', () => {
  beforeEach(async () => {
    parent = await tempDir('kl-full-disk');
    fs = await smallFs(parent, 'staging', 4 * 1024 * 1024, { forceInjection: true });
  });
  afterEach(async () => {
    await fs.dispose();
    await fsp.rm(parent, { recursive: true, force: true });
  });

  test('a new epoch whose seal meets a full disk is retried with the same epoch, and seals once space returns', async () => {
    const tableDir = path.join(fs.dir, 'staging', 'events');
    const h = await openStaging(tableDir);
    push(h, range(0, 100));
    await h.staging.sync();
    await fs.fill();
    push(h, range(100, 200));
    const next = { owner: h.staging.epoch.owner, epoch: h.staging.epoch.epoch + 1 };
    await expect(h.staging.beginEpoch(next)).rejects.toBeInstanceOf(DiskFullError);
    await expect(h.staging.beginEpoch(next)).rejects.toBeInstanceOf(DiskFullError);
    await fs.free();
    const { sealed } = await h.staging.beginEpoch(next);
    expect(sealed.map((p) => p.rows)).toEqual([200]);
    expect(h.staging.epoch).toEqual(next);
    await expect(h.staging.beginEpoch({ ...next, epoch: next.epoch - 1 })).rejects.toThrow(RangeError);
  });
});
