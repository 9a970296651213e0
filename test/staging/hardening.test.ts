/** Regression tests ("Hardening"), staging side. */
import { readdirSync, readlinkSync, promises as fsp } from 'node:fs';
import fc from 'fast-check';
import * as path from 'node:path';
import { OffsetOrderError } from '../../src/common/errors';
import { realDirectorySync, type DirectorySync } from '../../src/common/fs-durable';
import { resolveConsumer } from '../../src/config';
import { FileDeadLetterSink } from '../../src/dead-letters/dead-letter';
import { recordOffset, tpKey } from '../../src/common/offsets';
import { minuteKeyOf } from '../../src/staging';
import { MINUTE, openStaging, partFiles, readSealedRows, rowsFor, tempDir } from '../support/rows';

const T = 'orders';

let dir: string;
beforeEach(async () => {
  dir = await tempDir('kl-hardening');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

describe('multi-row records share an offset', () => {
  test('staging accepts the rows of one record (equal offsets) and still refuses offsets going backwards', async () => {
    const h = await openStaging(dir);
    // Records 0 and 1 made two and three rows, record 2 none, record 3 one.
    const result = h.staging.push({
      topic: T,
      partition: 0,
      batch: rowsFor(T, 0, [0, 0, 1, 1, 1, 3]),
      minute: MINUTE,
      handledThrough: recordOffset(3),
    });
    expect(result).toEqual({ staged: 6, skipped: 0 });
    expect(() =>
      h.staging.push({
        topic: T,
        partition: 1,
        batch: rowsFor(T, 1, [4, 4, 3]),
        minute: MINUTE,
        handledThrough: recordOffset(4),
      }),
    ).toThrow(OffsetOrderError);
    expect((await h.staging.sync()).get(tpKey(T, 0))).toBe(3);
    const { sealed } = await h.staging.close();
    expect(sealed).toHaveLength(1);
    expect(sealed[0]!.rows).toBe(6);
    expect(sealed[0]!.ranges).toEqual([{ topic: T, partition: 0, firstOffset: 0, lastOffset: 3, rows: 6 }]);
    expect((await readSealedRows(dir)).map((r) => r.offset)).toEqual([0, 0, 1, 1, 1, 3]);
  });

  test('a redelivered multi-row record is skipped whole', async () => {
    const h = await openStaging(dir);
    h.staging.push({
      topic: T,
      partition: 0,
      batch: rowsFor(T, 0, [0, 0, 1, 1]),
      minute: MINUTE,
      handledThrough: recordOffset(1),
    });
    const again = h.staging.push({
      topic: T,
      partition: 0,
      batch: rowsFor(T, 0, [1, 1, 2, 2]),
      minute: MINUTE,
      handledThrough: recordOffset(2),
    });
    expect(again).toEqual({ staged: 2, skipped: 2 });
    await h.staging.close();
    expect((await readSealedRows(dir)).map((r) => r.offset)).toEqual([0, 0, 1, 1, 2, 2]);
  });

  test("a record's rows stay in one part even when their event-time minutes differ", async () => {
    const h = await openStaging(dir);
    const m0 = minuteKeyOf(Date.UTC(2026, 10, 30, 11, 0));
    const m1 = minuteKeyOf(Date.UTC(2026, 10, 30, 11, 1));
    // Record 5's second row is in the next minute: it must not land in another part
    // (that part could go to another publication, whose offset runs would then count it).
    h.staging.push({
      topic: T,
      partition: 0,
      batch: rowsFor(T, 0, [5, 5, 6, 7]),
      minute: [m0, m1, m1, m0],
      handledThrough: recordOffset(7),
    });
    await h.staging.close();
    const byOffset = new Map<number, Set<string>>();
    for (const r of await readSealedRows(dir)) {
      const files = byOffset.get(r.offset) ?? new Set<string>();
      files.add(r.file);
      byOffset.set(r.offset, files);
    }
    expect([...byOffset.values()].every((files) => files.size === 1)).toBe(true);
    expect(await partFiles(dir, 'sealed')).toHaveLength(2); // m0 holds records 5 and 7
  });
});

/**
 * A directory sync that records, for each call, which entries the directory held:
 * the entries made durable by that call. Real fsyncs still run.
 */
function recordingSync(): DirectorySync & { readonly synced: Map<string, Set<string>> } {
  const synced = new Map<string, Set<string>>();
  return {
    synced,
    async syncDirectory(dir: string): Promise<void> {
      const entries = synced.get(dir) ?? new Set<string>();
      for (const name of readdirSync(dir)) entries.add(name);
      synced.set(dir, entries);
      await realDirectorySync.syncDirectory(dir);
    },
  };
}

describe('a created file is durable in its directory before its rows count', () => {
  test('a new .part is made durable in its directory before sync() reports its offsets, for every part', async () => {
    const fs = recordingSync();
    const h = await openStaging(dir, { directorySync: fs });
    const m0 = minuteKeyOf(Date.UTC(2026, 10, 30, 11, 0));
    const m1 = minuteKeyOf(Date.UTC(2026, 10, 30, 11, 1));
    h.staging.push({
      topic: T,
      partition: 0,
      batch: rowsFor(T, 0, [0, 1, 2]),
      minute: [m0, m0, m1],
      handledThrough: recordOffset(2),
    });
    expect((await h.staging.sync()).get(tpKey(T, 0))).toBe(2);
    const open = await partFiles(dir, 'open');
    expect(open).toHaveLength(2);
    // Snapshot now: the seal later fsyncs the directory again for its rename.
    const synced = [...(fs.synced.get(dir) ?? [])];
    for (const name of open) expect(synced).toContain(name);
    await h.staging.close();
  });

  test('a table directory created by staging is durable in its parents', async () => {
    const fs = recordingSync();
    const tableDir = path.join(dir, 'data', 'staging', 'events');
    const h = await openStaging(tableDir, { directorySync: fs });
    expect([...(fs.synced.get(dir) ?? [])]).toContain('data');
    expect([...(fs.synced.get(path.join(dir, 'data')) ?? [])]).toContain('staging');
    expect([...(fs.synced.get(path.join(dir, 'data', 'staging')) ?? [])]).toContain('events');
    await h.staging.close();
  });

  test('a dead-letter file (and its directory) is durable in its directory before write() resolves', async () => {
    const fs = recordingSync();
    const file = path.join(dir, 'dead-letter', 'c.jsonl');
    const sink = new FileDeadLetterSink(file, fs);
    await sink.write([
      {
        topic: T,
        partition: 0,
        offset: 7,
        timestamp: '0',
        reason: 'invalid-json',
        detail: 'x',
        key: null,
        value: Buffer.from('{'),
        headers: undefined,
      },
    ]);
    expect([...(fs.synced.get(dir) ?? [])]).toContain('dead-letter');
    expect([...(fs.synced.get(path.dirname(file)) ?? [])]).toContain('c.jsonl');
    await sink.close();
  });
});

/** Files under `dir` this process holds open now (Linux: /proc/self/fd). */
function openFilesUnder(dir: string): number {
  let n = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith(`${dir}/`)) n += 1;
    } catch {
      // closed between readdir and readlink
    }
  }
  return n;
}

describe('open part files are bounded', () => {
  test('a backfill over more event-time minutes than maxOpenParts keeps at most maxOpenParts parts open, seals the oldest, loses nothing', async () => {
    const h = await openStaging(dir, { maxOpenParts: 8 });
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, openFilesUnder(dir))), 1);
    const minutes = 300;
    const base = Date.UTC(2026, 0, 1);
    // Records 0..899: three per minute, a backfill in event-time order.
    for (let from = 0; from < minutes * 3; from += 90) {
      const offsets = Array.from({ length: 90 }, (_, i) => from + i);
      h.staging.push({
        topic: T,
        partition: 0,
        batch: rowsFor(T, 0, offsets),
        minute: offsets.map((o) => minuteKeyOf(base + Math.floor(o / 3) * 60_000)),
        handledThrough: recordOffset(from + 89),
      });
      expect(h.staging.stats().openParts).toBeLessThanOrEqual(8);
      await h.staging.sync();
      peak = Math.max(peak, openFilesUnder(dir));
    }
    expect((await h.staging.sync()).get(tpKey(T, 0))).toBe(minutes * 3 - 1);
    await h.staging.close();
    clearInterval(sampler);
    expect(peak).toBeLessThanOrEqual(8);
    expect(openFilesUnder(dir)).toBe(0);
    const offsets = (await readSealedRows(dir)).map((r) => r.offset).sort((a, b) => a - b);
    expect(offsets).toEqual(Array.from({ length: minutes * 3 }, (_, i) => i));
  });

  test('many minutes in one push: the files open at once stay bounded', async () => {
    const h = await openStaging(dir, { maxOpenParts: 4 });
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, openFilesUnder(dir))), 1);
    const offsets = Array.from({ length: 200 }, (_, i) => i);
    h.staging.push({
      topic: T,
      partition: 0,
      batch: rowsFor(T, 0, offsets),
      minute: offsets.map((o) => minuteKeyOf(Date.UTC(2026, 0, 1) + o * 60_000)),
      handledThrough: recordOffset(199),
    });
    expect((await h.staging.sync()).get(tpKey(T, 0))).toBe(199);
    peak = Math.max(peak, openFilesUnder(dir));
    await h.staging.close();
    clearInterval(sampler);
    expect(peak).toBeLessThanOrEqual(4);
    expect(await partFiles(dir, 'sealed')).toHaveLength(200);
  });

  test('random pushes over many minutes, syncs, flushes, size seals and new epochs: never more files open than the bound, never stuck, every row once', async () => {
    type Step =
      | { kind: 'push'; partition: number; rows: number; minutes: number; shift: number }
      | { kind: 'sync' }
      | { kind: 'flush'; force: boolean }
      | { kind: 'epoch' };
    const step: fc.Arbitrary<Step> = fc.oneof(
      {
        weight: 5,
        arbitrary: fc.record({
          kind: fc.constant('push' as const),
          partition: fc.integer({ min: 0, max: 2 }),
          rows: fc.integer({ min: 1, max: 40 }),
          minutes: fc.integer({ min: 1, max: 12 }),
          shift: fc.integer({ min: 0, max: 20 }),
        }),
      },
      { weight: 2, arbitrary: fc.constant({ kind: 'sync' as const }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('flush' as const), force: fc.boolean() }) },
      { weight: 1, arbitrary: fc.constant({ kind: 'epoch' as const }) },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.array(step, { minLength: 1, maxLength: 25 }),
        async (maxOpenParts, steps) => {
          const sub = await fsp.mkdtemp(path.join(dir, 'run-'));
          const h = await openStaging(sub, { maxOpenParts, maxPartBytes: 3_000 });
          const next = [0, 0, 0];
          let epoch = h.staging.epoch;
          let peak = 0;
          const sampler = setInterval(() => (peak = Math.max(peak, openFilesUnder(sub))), 1);
          try {
            for (const s of steps) {
              if (s.kind === 'push') {
                const from = next[s.partition]!;
                const offsets = Array.from({ length: s.rows }, (_, i) => from + i);
                next[s.partition] = from + s.rows;
                h.staging.push({
                  topic: T,
                  partition: s.partition,
                  batch: rowsFor(T, s.partition, offsets),
                  minute: offsets.map((o) =>
                    minuteKeyOf(Date.UTC(2026, 0, 1) + (s.shift + (o % s.minutes)) * 60_000),
                  ),
                  handledThrough: recordOffset(from + s.rows - 1),
                });
              } else if (s.kind === 'sync') {
                const durable = await h.staging.sync();
                for (let p = 0; p < 3; p++) {
                  if (next[p]! > 0) expect(durable.get(tpKey(T, p))).toBe(next[p]! - 1);
                }
              } else if (s.kind === 'flush') {
                await h.staging.flush({ force: s.force });
              } else {
                epoch = { owner: epoch.owner, epoch: epoch.epoch + 1 };
                await h.staging.beginEpoch(epoch);
              }
              peak = Math.max(peak, openFilesUnder(sub));
              expect(h.staging.stats().openParts).toBeLessThanOrEqual(maxOpenParts);
            }
            await h.staging.close();
          } finally {
            clearInterval(sampler);
          }
          expect(peak).toBeLessThanOrEqual(maxOpenParts);
          const rows = await readSealedRows(sub);
          for (let p = 0; p < 3; p++) {
            const offsets = rows
              .filter((r) => r.partition === p)
              .map((r) => r.offset)
              .sort((a, b) => a - b);
            expect(offsets).toEqual(Array.from({ length: next[p]! }, (_, i) => i));
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  test('staging.maxOpenParts defaults to 64 and is validated', () => {
    const valid = { name: 'orders', topics: ['orders'], schema: { fields: { id: 'int64' } } };
    const env = { KAFKA_BROKERS: 'b:9092' };
    expect(resolveConsumer(valid, 'x', env).staging.maxOpenParts).toBe(64);
    expect(resolveConsumer({ ...valid, staging: { maxOpenParts: 3 } }, 'x', env).staging.maxOpenParts).toBe(
      3,
    );
    expect(() => resolveConsumer({ ...valid, staging: { maxOpenParts: 0 } }, 'x', env)).toThrow(
      /staging\.maxOpenParts/,
    );
  });
});
