import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { FileLockConflictError, OffsetOrderError, PartCorruptError } from '../../src/common/errors';
import { silentLogger } from '../../src/common/logger';
import { recordOffset, tpKey, type DurableOffset } from '../../src/common/offsets';
import {
  FileLocks,
  SealedPartCatalog,
  minuteKeyOf,
  parsePartName,
  recoverTableStaging,
} from '../../src/staging';
import { PartWriter } from '../../src/staging/part-writer';
import { schemaKeyOf } from '../../src/staging/schema-key';
import {
  FIXED_NOW,
  MINUTE,
  TEST_SCHEMA,
  openStaging,
  partFiles,
  payloadOf,
  range,
  readSealedRows,
  rowsFor,
  tempDir,
  type StagingHarness,
} from '../support/rows';

const T = 'orders';
const push = (h: StagingHarness, partition: number, from: number, to: number) =>
  h.staging.push({
    topic: T,
    partition,
    batch: rowsFor(T, partition, range(from, to)),
    minute: MINUTE,
    handledThrough: recordOffset(to - 1),
  });

const offsetsOf = (rows: { offset: number }[]) => rows.map((r) => r.offset).sort((a, b) => a - b);

describe('staging lifecycle regressions', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await tempDir();
  });
  afterEach(async () => {
    await fsp.rm(dir, { recursive: true, force: true });
  });

  test('a late batch for the same schema/minute during a flush neither truncates nor loses the detached part', async () => {
    const h = await openStaging(dir);
    push(h, 0, 0, 100);
    await h.staging.sync();
    const flushing = h.staging.flush({ force: true });
    // The flush has detached the writer synchronously; this push must open a new part.
    push(h, 0, 100, 150);
    const { sealed } = await flushing;
    expect(sealed).toHaveLength(1);
    expect(sealed[0]!.rows).toBe(100);
    expect(await partFiles(dir, 'open')).toHaveLength(1);
    await h.staging.close();
    const rows = await readSealedRows(dir);
    expect(offsetsOf(rows)).toEqual(range(0, 150));
    expect(new Set(rows.map((r) => r.file)).size).toBe(2);
    for (const r of rows) expect(r.message).toBe(payloadOf(T, 0, r.offset));
  });

  test('two writers never share a path, and a part is created exclusively (never over an existing file)', async () => {
    const h = await openStaging(dir);
    const paths = new Set<string>();
    for (let i = 0; i < 20; i++) {
      push(h, 0, i * 10, i * 10 + 10);
      const { sealed } = await h.staging.flush({ force: true });
      for (const s of sealed) paths.add(s.path);
    }
    expect(paths.size).toBe(20);

    // Force a collision: a writer whose path already exists must fail, leaving the file's bytes alone.
    const locks = new FileLocks();
    const victim = path.join(dir, [...paths][0]!.split('/').pop()!.replace('.arrows', '.arrows.part'));
    const name = parsePartName(path.basename(victim))!;
    await fsp.writeFile(victim, 'precious');
    const writer = new PartWriter(
      dir,
      TEST_SCHEMA,
      schemaKeyOf(TEST_SCHEMA),
      name.minute,
      { owner: 'o', epoch: 1 },
      name.id,
      locks,
      'w',
      FIXED_NOW,
    );
    writer.append(rowsFor(T, 0, [1]), T, 0, recordOffset(1), recordOffset(1));
    await expect(writer.syncPending()).rejects.toMatchObject({ code: 'EEXIST' });
    expect(await fsp.readFile(victim, 'utf8')).toBe('precious');
    expect(locks.size).toBe(0);
  });

  test('recovery never renames or seals a live part', async () => {
    const h = await openStaging(dir);
    push(h, 0, 0, 10);
    await h.staging.sync();
    const [live] = await partFiles(dir, 'open');
    const report = await recoverTableStaging({
      tableDir: dir,
      locks: h.locks,
      owner: 'recovery',
      logger: silentLogger(),
    });
    expect(report.skippedLocked).toEqual([path.join(dir, live!)]);
    expect(report.recoveredParts).toBe(0);
    expect(await partFiles(dir, 'open')).toEqual([live]);
    // The writer is unharmed and seals its part itself.
    push(h, 0, 10, 20);
    await h.staging.close();
    expect(offsetsOf(await readSealedRows(dir))).toEqual(range(0, 20));
  });

  test("recovery never deletes or moves another task's output", async () => {
    const h = await openStaging(dir);
    push(h, 0, 0, 10);
    const { sealed } = await h.staging.flush({ force: true });
    const published = sealed[0]!.path;
    // Another task (a publication) holds the sealed part; break its bytes so recovery would quarantine it if it dared.
    const locks = new FileLocks();
    using _publication = locks.lock(published, 'publication-1');
    const before = await fsp.readFile(published);
    await fsp.truncate(published, before.byteLength - 3);
    // And another task's rewrite output in progress.
    const otherOutput = published
      .replace(/\.arrows$/, '-r.arrows.part')
      .replace(/(\.[0-9A-Z]{26})-r/, '$1-r');
    await fsp.writeFile(otherOutput, 'half-written');
    using _rewrite = locks.lock(otherOutput, 'recovery-elsewhere');
    const planFile = path.join(dir, 'plan-123.json.tmp-1');
    await fsp.writeFile(planFile, '{}');

    const report = await recoverTableStaging({
      tableDir: dir,
      locks,
      owner: 'recovery',
      logger: silentLogger(),
    });
    expect([...report.skippedLocked].sort()).toEqual([otherOutput, published].sort());
    expect(report.quarantined).toEqual([]);
    expect((await fsp.stat(published)).size).toBe(before.byteLength - 3);
    expect(await fsp.readFile(otherOutput, 'utf8')).toBe('half-written');
    expect(await fsp.readFile(planFile, 'utf8')).toBe('{}');
  });

  test('a failed seal releases only its own file locks', async () => {
    const locks = new FileLocks();
    const h = await openStaging(dir, { locks });
    using unrelated = locks.lock(path.join(dir, 'unrelated'), 'someone-else');
    h.staging.push({
      topic: T,
      partition: 0,
      batch: rowsFor(T, 0, range(0, 4)),
      minute: [MINUTE, MINUTE, minuteKeyOf(FIXED_NOW + 60_000), minuteKeyOf(FIXED_NOW + 60_000)],
      handledThrough: recordOffset(3),
    });
    await h.staging.sync();
    const open = await partFiles(dir, 'open');
    expect(open).toHaveLength(2);
    // A directory where the first part's sealed name goes makes its rename fail.
    const doomed = path.join(dir, open[0]!.replace(/\.part$/, ''));
    await fsp.mkdir(doomed);
    await expect(h.staging.flush({ force: true })).rejects.toThrow(/failed on disk/);
    expect(locks.holderOf(path.join(dir, open[0]!))).toBeUndefined();
    expect(locks.holderOf(path.join(dir, open[1]!))).toBeUndefined();
    expect(locks.holderOf(unrelated.path)).toBe('someone-else');
    expect(locks.size).toBe(1);
    // The other part sealed; the failed one is still on disk for recovery, nothing lost.
    expect((await fsp.stat(doomed)).isDirectory()).toBe(true);
    expect((await partFiles(dir, 'sealed')).filter((n) => path.join(dir, n) !== doomed)).toEqual([
      open[1]!.replace(/\.part$/, ''),
    ]);
    expect(await partFiles(dir, 'open')).toEqual([open[0]]);
    // Staging refuses to report anything durable any more.
    expect(() => push(h, 0, 4, 5)).toThrow(/failed on disk/);
    await fsp.rmdir(doomed);
    await recoverTableStaging({
      tableDir: dir,
      locks: new FileLocks(),
      owner: 'r',
      logger: silentLogger(),
    });
    expect(offsetsOf(await readSealedRows(dir))).toEqual(range(0, 4));
  });

  test('a torn tail is dropped and counted; the whole batches before it are kept', async () => {
    const h = await openStaging(dir);
    push(h, 0, 0, 50);
    await h.staging.sync();
    push(h, 0, 50, 80);
    await h.staging.sync();
    const [open] = await partFiles(dir, 'open');
    const file = path.join(dir, open!);
    const size = (await fsp.stat(file)).size;
    // Simulate a crash in the middle of the next tick's write: part of a message header and body.
    await fsp.appendFile(file, Buffer.from([0xff, 0xff, 0xff, 0xff, 0x40, 0x01, 0, 0, 1, 2, 3]));
    const report = await recoverTableStaging({
      tableDir: dir,
      locks: new FileLocks(),
      owner: 'r',
      logger: silentLogger(),
    });
    expect(report).toMatchObject({ recoveredParts: 1, tornParts: 1, tornBytes: 11 });
    expect(await partFiles(dir, 'open')).toEqual([]);
    const rows = await readSealedRows(dir);
    expect(offsetsOf(rows)).toEqual(range(0, 80));
    expect(rows[0]!.file).toMatch(/-r\.arrows$/);
    expect(size).toBeGreaterThan(0);
  });

  test('an empty or headerless part is removed, with the count in the report', async () => {
    const name = (id: string) => path.join(dir, `0123456789abcdef.${MINUTE}.${id}.arrows.part`);
    await fsp.writeFile(name('01JF0000000000000000000001'), '');
    await fsp.writeFile(name('01JF0000000000000000000002'), 'not arrow at all');
    const h = await openStaging(dir);
    h.staging.push({
      topic: T,
      partition: 0,
      batch: rowsFor(T, 0, []),
      minute: MINUTE,
      handledThrough: recordOffset(0),
    });
    const report = await recoverTableStaging({
      tableDir: dir,
      locks: new FileLocks(),
      owner: 'r',
      logger: silentLogger(),
    });
    expect(report.removedEmpty).toBe(2);
    expect(await fsp.readdir(dir)).toEqual([]);
  });

  test('a corrupt sealed part is quarantined, never half-read as if whole', async () => {
    const h = await openStaging(dir);
    push(h, 0, 0, 100);
    const { sealed } = await h.staging.flush({ force: true });
    const file = sealed[0]!.path;
    const bytes = await fsp.readFile(file);
    // More than the checksum trailer (part-digest.ts): the stream itself is torn.
    await fsp.writeFile(file, bytes.subarray(0, bytes.byteLength - 80));
    await expect(import('../../src/staging').then((m) => m.readSealedPart(file))).rejects.toBeInstanceOf(
      PartCorruptError,
    );
    const catalog = new SealedPartCatalog(dir, new FileLocks(), 'planner', silentLogger());
    const refreshed = await catalog.refresh();
    expect(refreshed.parts).toEqual([]);
    expect(refreshed.quarantined).toEqual([path.join(dir, 'quarantine', path.basename(file))]);
    expect(await partFiles(dir, 'sealed')).toEqual([]);
  });

  test('a writer describes its sealed part as reading it back would; the catalog takes that description', async () => {
    const h = await openStaging(dir);
    push(h, 0, 0, 10);
    push(h, 1, 5, 25);
    push(h, 0, 10, 12);
    const { sealed } = await h.staging.close();
    expect(sealed.length).toBeGreaterThan(0);
    const { readSealedPart } = await import('../../src/staging');
    for (const part of sealed) expect((await readSealedPart(part.path)).part).toEqual(part);

    const catalog = new SealedPartCatalog(dir, new FileLocks(), 'planner', silentLogger());
    // A description under another spelling of the directory is not taken (it would be known twice).
    catalog.remember({ ...sealed[0]!, path: `${dir}/./${path.basename(sealed[0]!.path)}` });
    catalog.remember({ ...sealed[0]!, rows: 999 });
    const refreshed = await catalog.refresh();
    expect(refreshed.parts.find((p) => p.path === sealed[0]!.path)?.rows).toBe(999); // taken, not read back
    expect(refreshed.parts).toHaveLength(sealed.length);
    await fsp.rm(sealed[0]!.path);
    expect((await catalog.refresh()).parts.map((p) => p.path)).not.toContain(sealed[0]!.path);
  });

  test('redelivered records at or below the high-water are skipped and counted', async () => {
    const h = await openStaging(dir, { highWaters: new Map([[tpKey(T, 1), 9 as DurableOffset]]) });
    expect(push(h, 1, 0, 20)).toEqual({ staged: 10, skipped: 10 });
    expect(push(h, 1, 15, 30)).toEqual({ staged: 10, skipped: 5 });
    expect(push(h, 1, 0, 30)).toEqual({ staged: 0, skipped: 30 });
    expect(h.staging.stats()).toMatchObject({ stagedRows: 20, skippedRows: 45 });
    await h.staging.close();
    expect(offsetsOf(await readSealedRows(dir))).toEqual(range(10, 30));
  });

  test('durable offsets never include rows that are still only buffered', async () => {
    const h = await openStaging(dir);
    push(h, 0, 0, 10);
    expect(h.staging.durableOffsets().get(tpKey(T, 0))).toBeUndefined();
    const syncing = h.staging.sync();
    // Pushed after the tick began: not covered by it.
    push(h, 0, 10, 20);
    expect((await syncing).get(tpKey(T, 0))).toBe(9);
    expect((await h.staging.sync()).get(tpKey(T, 0))).toBe(19);
    // A record handled without a row (filtered or dead-lettered) still advances the durable offset.
    h.staging.push({ topic: T, partition: 0, minute: MINUTE, handledThrough: recordOffset(25) });
    expect((await h.staging.sync()).get(tpKey(T, 0))).toBe(25);
  });

  test('an interrupted recovery rewrite is finished exactly once, never duplicated', async () => {
    const h = await openStaging(dir);
    push(h, 0, 0, 30);
    await h.staging.sync();
    const [open] = await partFiles(dir, 'open');
    const original = path.join(dir, open!);
    await fsp.appendFile(original, Buffer.from([0xff, 0xff, 0xff, 0xff, 9]));
    // Crash 1: the rewrite was half-written.
    const rewriteOpen = original.replace('.arrows.part', '-r.arrows.part');
    await fsp.writeFile(rewriteOpen, (await fsp.readFile(original)).subarray(0, 100));
    const locks = new FileLocks();
    await recoverTableStaging({ tableDir: dir, locks, owner: 'r', logger: silentLogger() });
    expect(offsetsOf(await readSealedRows(dir))).toEqual(range(0, 30));

    // Crash 2: the rewrite was sealed but the original not yet removed.
    const [sealedName] = await partFiles(dir, 'sealed');
    await fsp.writeFile(original, await fsp.readFile(path.join(dir, sealedName!)));
    const report = await recoverTableStaging({ tableDir: dir, locks, owner: 'r', logger: silentLogger() });
    expect(report.removedLeftovers).toBe(1);
    expect(await partFiles(dir, 'open')).toEqual([]);
    expect(offsetsOf(await readSealedRows(dir))).toEqual(range(0, 30));
  });

  test('offsets going backwards inside one push are refused, not staged', async () => {
    const h = await openStaging(dir);
    expect(() =>
      h.staging.push({
        topic: T,
        partition: 0,
        batch: rowsFor(T, 0, [5, 6, 4]),
        minute: MINUTE,
        handledThrough: recordOffset(6),
      }),
    ).toThrow(OffsetOrderError);
    expect(h.staging.stats().stagedRows).toBe(0);
    expect(await partFiles(dir, 'open')).toEqual([]);
  });

  test('the size limit seals a part and the next push opens a new one', async () => {
    const h = await openStaging(dir, { maxPartBytes: 4_000 });
    for (let i = 0; i < 10; i++) push(h, 0, i * 20, i * 20 + 20);
    const { sealed } = await h.staging.flush();
    expect(sealed.length).toBeGreaterThanOrEqual(3);
    await h.staging.close();
    expect(offsetsOf(await readSealedRows(dir))).toEqual(range(0, 200));
  });

  test('the age limit and a passing minute seal parts on a plain flush; fresh parts stay open', async () => {
    const h = await openStaging(dir, { maxPartAgeMs: 5_000 });
    push(h, 0, 0, 10);
    expect((await h.staging.flush()).sealed).toHaveLength(0);
    h.clock.now += 5_000;
    expect((await h.staging.flush()).sealed).toHaveLength(1);
    push(h, 0, 10, 20);
    h.clock.now += 60_000; // the part is young, but its minute has passed
    expect((await h.staging.flush()).sealed).toHaveLength(1);
  });

  test('event-time minutes put each minute in its own part, in offset order', async () => {
    const h = await openStaging(dir);
    const m = (k: number) => minuteKeyOf(FIXED_NOW + k * 60_000);
    h.staging.push({
      topic: T,
      partition: 2,
      batch: rowsFor(T, 2, range(0, 6)),
      minute: [m(0), m(0), m(1), m(0), m(2), m(2)],
      handledThrough: recordOffset(5),
    });
    const { sealed } = await h.staging.close();
    const byMinute = new Map(sealed.map((s) => [s.minute, s.ranges[0]!]));
    expect(byMinute.get(m(0))).toMatchObject({ firstOffset: 0, lastOffset: 3, rows: 3 });
    expect(byMinute.get(m(1))).toMatchObject({ firstOffset: 2, lastOffset: 2, rows: 1 });
    expect(byMinute.get(m(2))).toMatchObject({ firstOffset: 4, lastOffset: 5, rows: 2 });
  });

  test('a new epoch seals every open part before its first push, so no part spans two epochs', async () => {
    const h = await openStaging(dir, { epoch: { owner: 'replica-a', epoch: 1 } });
    push(h, 0, 0, 10);
    const beginning = h.staging.beginEpoch({ owner: 'replica-a', epoch: 2 });
    push(h, 0, 10, 20); // arrives while the old epoch's parts are sealing
    expect((await beginning).sealed).toHaveLength(1);
    await h.staging.close();
    const rows = await readSealedRows(dir);
    for (const r of rows) expect(r.epoch.epoch).toBe(r.offset < 10 ? 1 : 2);
    expect(offsetsOf(rows)).toEqual(range(0, 20));
  });

  test('a lost partition drops its high-water to the ceiling so its records are staged again on return', async () => {
    const h = await openStaging(dir);
    push(h, 0, 0, 50);
    await h.staging.sync();
    h.staging.lowerHighWater(T, 0, 29 as DurableOffset);
    expect(h.staging.durableOffsets().get(tpKey(T, 0))).toBe(29);
    expect(push(h, 0, 30, 60)).toEqual({ staged: 30, skipped: 0 });
  });

  test('file locks: a conflicting lock names the holder; only the lock object releases it', () => {
    const locks = new FileLocks();
    const a = locks.lock('/x', 'task-a');
    expect(() => locks.lock('/x', 'task-b')).toThrow(FileLockConflictError);
    expect(() => locks.lock('/x', 'task-b')).toThrow(/locked by task-a/);
    expect(() => locks.lockAll(['/y', '/x'], 'task-c')).toThrow(FileLockConflictError);
    expect(locks.holderOf('/y')).toBeUndefined();
    a.release();
    const b = locks.lock('/x', 'task-b');
    a.release(); // a stale release must not free b's lock
    expect(locks.holderOf('/x')).toBe('task-b');
    b.release();
    expect(locks.size).toBe(0);
  });

  test('a part whose stream was finished but not renamed before a crash is sealed as it is', async () => {
    const h = await openStaging(dir);
    push(h, 3, 0, 10);
    const { sealed } = await h.staging.flush({ force: true });
    const file = sealed[0]!.path;
    await fsp.rename(file, `${file}.part`);
    const report = await recoverTableStaging({
      tableDir: dir,
      locks: new FileLocks(),
      owner: 'r',
      logger: silentLogger(),
    });
    expect(report).toMatchObject({ recoveredParts: 1, tornParts: 0 });
    expect(await partFiles(dir, 'sealed')).toEqual([path.basename(file)]);
    expect(report.sealedParts[0]!.checksum).toBe(sealed[0]!.checksum);
  });
});
