import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { PartCorruptError } from '../../src/common/errors';
import { silentLogger } from '../../src/common/logger';
import { recordOffset } from '../../src/common/offsets';
import { Permits } from '../../src/materializer/permits';
import { preparePart } from '../../src/materializer/preparation';
import type { PlanPart } from '../../src/materializer/ledger';
import { FileLocks, readSealedPart, recoverTableStaging } from '../../src/staging';
import { DIGEST_TRAILER_BYTES, matchesPartChecksum } from '../../src/staging/part-digest';
import type { SealedPart } from '../../src/staging/sealed-part';
import { MINUTE, openStaging, partFiles, range, readSealedRows, rowsFor, tempDir } from '../support/rows';

/**
 * Parts carry a CRC32C trailer; earlier versions wrote a SHA-256 one and put the SHA-256
 * hex of the whole file in their plans. A replica upgraded over a staging directory
 * must read both, and must never take a damaged part for a whole one.
 */
const T = 'orders';

async function sealedPart(dir: string, rows = 40): Promise<SealedPart> {
  const h = await openStaging(dir);
  h.staging.push({
    topic: T,
    partition: 0,
    batch: rowsFor(T, 0, range(0, rows)),
    minute: MINUTE,
    handledThrough: recordOffset(rows - 1),
  });
  const { sealed } = await h.staging.flush({ force: true });
  await h.staging.close();
  return sealed[0]!;
}

/** The same part as an earlier version wrote it: `KLSHA256` + SHA-256 of the stream. */
function withLegacyTrailer(bytes: Buffer): Buffer {
  const stream = bytes.subarray(0, bytes.byteLength - DIGEST_TRAILER_BYTES);
  const digest = createHash('sha256').update(stream).digest();
  return Buffer.concat([stream, Buffer.from('KLSHA256', 'latin1'), digest]);
}

const planPartOf = (part: SealedPart, checksum = part.checksum): PlanPart => ({
  path: part.path,
  bytes: part.bytes,
  checksum,
  epoch: part.epoch,
  rows: part.rows,
  keptRows: part.rows,
  ranges: part.ranges,
  keep: [],
});

const preparation = () => ({ fetch: new Permits('fetch', 1), decode: new Permits('decode', 1) });

describe('part checksums across the upgrade from SHA-256 to CRC32C', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await tempDir();
  });
  afterEach(async () => {
    await fsp.rm(dir, { recursive: true, force: true });
  });

  test('a new part ends with a CRC32C trailer; the writer and a reader agree on its checksum', async () => {
    const written = await sealedPart(dir);
    const bytes = await fsp.readFile(written.path);
    expect(bytes.subarray(-DIGEST_TRAILER_BYTES, -4).toString('latin1')).toBe('KLCRC32C');
    expect(written.checksum).toMatch(/^crc32c:[0-9a-f]{8}$/);
    expect((await readSealedPart(written.path)).part).toEqual(written);
    expect(matchesPartChecksum(bytes, written.checksum)).toBe(true);
  });

  test('a bit flipped anywhere in a new part is refused by the reader and by preparation', async () => {
    const written = await sealedPart(dir);
    const bytes = await fsp.readFile(written.path);
    // Every 7th byte, each bit position in turn: header, batches, end-of-stream and trailer.
    for (let at = 0; at < bytes.byteLength; at += 7) {
      const damaged = Buffer.from(bytes);
      damaged[at]! ^= 1 << (at % 8);
      expect([at, matchesPartChecksum(damaged, written.checksum)]).toEqual([at, false]);
    }
    const damaged = Buffer.from(bytes);
    damaged[Math.floor(bytes.byteLength / 2)]! ^= 0x10;
    await fsp.writeFile(written.path, damaged);
    await expect(readSealedPart(written.path)).rejects.toBeInstanceOf(PartCorruptError);
    await expect(preparePart(planPartOf(written), preparation())).rejects.toBeInstanceOf(PartCorruptError);
  });

  test('a part sealed by an earlier version (SHA-256 trailer) is read, and its damage still refused', async () => {
    const written = await sealedPart(dir);
    const legacy = withLegacyTrailer(await fsp.readFile(written.path));
    await fsp.writeFile(written.path, legacy);
    const { part } = await readSealedPart(written.path);
    expect(part.rows).toBe(written.rows);
    expect(part.bytes).toBe(legacy.byteLength);
    expect(part.checksum).toMatch(/^crc32c:/);
    // Planned by this version: prepared against the CRC32C of the whole (legacy) file.
    expect((await preparePart(planPartOf(part), preparation())).descriptor.rows).toBe(written.rows);

    const damaged = Buffer.from(legacy);
    damaged[100]! ^= 0x01;
    await fsp.writeFile(written.path, damaged);
    await expect(readSealedPart(written.path)).rejects.toThrow(/does not match/);
  });

  test('a plan written by an earlier version (SHA-256 hex of the file) is prepared, and a changed file refused', async () => {
    const written = await sealedPart(dir);
    const legacy = withLegacyTrailer(await fsp.readFile(written.path));
    await fsp.writeFile(written.path, legacy);
    const legacyPlanChecksum = createHash('sha256').update(legacy).digest('hex');
    const planned = planPartOf({ ...written, bytes: legacy.byteLength }, legacyPlanChecksum);
    const prepared = await preparePart(planned, preparation());
    expect(prepared.descriptor).toMatchObject({ rows: written.rows, checksum: legacyPlanChecksum });

    const damaged = Buffer.from(legacy);
    damaged[legacy.byteLength - 1]! ^= 0x80;
    await fsp.writeFile(written.path, damaged);
    await expect(preparePart(planned, preparation())).rejects.toThrow(/checksum differs from the plan/);
  });

  test('recovery: an open part an earlier version finished (SHA-256 trailer) is sealed as it is; a torn one rewritten with CRC32C', async () => {
    const written = await sealedPart(dir);
    const legacy = withLegacyTrailer(await fsp.readFile(written.path));
    await fsp.writeFile(`${written.path}.part`, legacy);
    await fsp.rm(written.path);
    const report = await recoverTableStaging({
      tableDir: dir,
      locks: new FileLocks(),
      owner: 'r',
      logger: silentLogger(),
    });
    expect(report).toMatchObject({ recoveredParts: 1, tornParts: 0 });
    expect(await fsp.readFile(written.path)).toEqual(legacy);

    // The earlier writer died inside its 40-byte trailer: a torn tail, never a corrupt part.
    await fsp.writeFile(`${written.path}.part`, legacy.subarray(0, legacy.byteLength - 25));
    await fsp.rm(written.path);
    const torn = await recoverTableStaging({
      tableDir: dir,
      locks: new FileLocks(),
      owner: 'r',
      logger: silentLogger(),
    });
    expect(torn).toMatchObject({ recoveredParts: 1, tornParts: 1, tornBytes: 15 });
    const [rewritten] = await partFiles(dir, 'sealed');
    const bytes = await fsp.readFile(path.join(dir, rewritten!));
    expect(bytes.subarray(-DIGEST_TRAILER_BYTES, -4).toString('latin1')).toBe('KLCRC32C');
    expect((await readSealedRows(dir)).map((r) => r.offset)).toEqual(range(0, 40));
  });
});
