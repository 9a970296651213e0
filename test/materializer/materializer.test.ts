import { spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import * as arrowAdd from '../../src/lance/arrow-add';
import type { CrashPointName } from '../../src/faults/crash-points';
import { PartialPublicationError } from '../../src/materializer/publication-errors';
import { ledger } from '../../src/materializer/ledger';
import { appendEpoch, mayHaveDroppedEntries, type ChainEntry } from '../../src/ownership/chain';
import {
  TABLE,
  TOPIC,
  expectExactly,
  ledgerFiles,
  openFixtureStaging,
  openMaterializer,
  ownershipOf,
  readLance,
  sealedPartCount,
  stageRows,
} from '../support/materializer-fixture';
import { tempDir } from '../support/rows';
import { openTableIfCommitted } from '../../src/lance/open-if-committed';

/** Rejects instead of letting a hang run into jest's timeout (which would hide what hung). */
async function settlesWithin<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

const CHILD = path.resolve(__dirname, '../../dist/test/support/materializer-child.js');
const chainA = [{ owner: 'A', epoch: 1, start: 0 }];

let dir: string;
let tableDir: string;
let lanceDir: string;
beforeEach(async () => {
  dir = await tempDir('kl-mat');
  tableDir = path.join(dir, 'staging', TABLE);
  lanceDir = path.join(dir, 'lance');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

describe.each(['buffered', 'streamed'] as const)('materializer (%s)', (mode) => {
  test('publishes every committed staged row exactly once, deletes the sources and empties the ledger', async () => {
    await stageRows(tableDir, { partitions: 3, perPartition: 20_000, rowsPerPart: 2_500 });
    const m = await openMaterializer(tableDir, lanceDir, { mode, maxPublicationBytes: 1024 * 1024 });
    m.setOwnership(ownershipOf(3, chainA, 20_000));
    const adds = jest.spyOn(arrowAdd, 'appendArrowTable');
    const results = await m.runOnce();
    expect(results.length).toBeGreaterThan(1); // the size bound split the backlog
    // Whole parts go to LanceDB as their own bytes (publication-file.ts), never re-encoded.
    expect(adds.mock.calls.map(([, data]) => (data instanceof Uint8Array ? 'file' : 'table'))).toEqual(
      results.map(() => 'file'),
    );
    adds.mockRestore();
    expectExactly(await readLance(lanceDir), 3, () => 20_000);
    expect(await sealedPartCount(tableDir)).toBe(0);
    expect(await ledgerFiles(tableDir)).toEqual([]);
    const stats = m.stats();
    expect(stats.permits.every((p) => p.inUse === 0)).toBe(true);
    expect(stats.reservation.bytes).toBe(0);
    m.close();
  });
});

test("the ceiling rule: an ended epoch's rows at or above the next owner's start are cut, never published", async () => {
  await stageRows(tableDir, { partitions: 2, perPartition: 1_000, rowsPerPart: 300 });
  const m = await openMaterializer(tableDir, lanceDir);
  // Partition 0 moved to B at 450 (A's rows 450..999 were re-consumed by B); partition 1 is still A's.
  const ownership = ownershipOf(2, chainA, 1_000);
  ownership.set(ownership.keys().next().value!, {
    chain: [...chainA, { owner: 'B', epoch: 1, start: 450 }],
    committed: 2_000,
  });
  m.setOwnership(ownership);
  const adds = jest.spyOn(arrowAdd, 'appendArrowTable');
  await m.runOnce();
  // A part cut by the rule goes as the rows kept: its bytes hold the cut rows too.
  expect(adds.mock.calls.some(([, data]) => !(data instanceof Uint8Array))).toBe(true);
  adds.mockRestore();
  expectExactly(await readLance(lanceDir), 2, (p) => (p === 0 ? 450 : 1_000));
  expect(await sealedPartCount(tableDir)).toBe(0);
  m.close();
});

test('parts of an epoch a replaced (not full) chain lacks are held, not guessed at', async () => {
  await stageRows(tableDir, { partitions: 1, perPartition: 100, rowsPerPart: 100, owner: 'Z' });
  const m = await openMaterializer(tableDir, lanceDir);
  m.setOwnership(ownershipOf(1, chainA, 100));
  expect(await m.runOnce()).toEqual([]);
  expect(m.stats().unresolvableParts).toBe(1);
  expect(await sealedPartCount(tableDir)).toBe(1);
  expect(await readLance(lanceDir)).toEqual([]);
  m.close();
});

test('an epoch the full chain dropped is published, and its redundant copy of rows another epoch published is not inserted twice', async () => {
  // Z owned p0 from 0 in epoch 1 and staged 0..999, but its last landed commit was 600: B
  // claimed at 600 and published 600..999 while the chain still held both.
  await stageRows(tableDir, { partitions: 1, perPartition: 400, rowsPerPart: 400, owner: 'B', from: 600 });
  const m = await openMaterializer(tableDir, lanceDir, { owner: 'live' });
  const zThenB: ChainEntry[] = [
    { owner: 'Z', epoch: 1, start: 0 },
    { owner: 'B', epoch: 1, start: 600 },
  ];
  m.setOwnership(ownershipOf(1, zThenB, 1_000));
  expect((await m.runOnce()).map((r) => r.rows)).toEqual([400]);
  // Z's parts were on a volume that came back 200 claims later: neither Z nor B is in the chain.
  await stageRows(tableDir, { partitions: 1, perPartition: 1_000, rowsPerPart: 500, owner: 'Z' });
  let chain = zThenB;
  for (let i = 0; i < 200; i++)
    chain = appendEpoch(chain, { owner: `01JE${String(i).padStart(22, '0')}`, epoch: 2, start: 1_000 + i });
  expect(mayHaveDroppedEntries(chain) && chain.every((e) => e.owner !== 'Z' && e.owner !== 'B')).toBe(true);
  m.setOwnership(ownershipOf(1, chain, 1_200));
  const results = await m.runOnce();
  // Before: Z's parts were held as unresolvable for good (0..599 never published).
  expect(m.stats().unresolvableParts).toBe(0);
  expect(results.reduce((n, r) => n + r.rows, 0)).toBe(1_000); // planned: every row below the oldest start
  expectExactly(await readLance(lanceDir), 1, () => 1_000); // inserted: only the absent 0..599
  expect(await sealedPartCount(tableDir)).toBe(0);
  m.close();
});

test("this replica's running epoch publishes a part only once all its rows are committed", async () => {
  await stageRows(tableDir, { partitions: 1, perPartition: 100, rowsPerPart: 100, owner: 'live' });
  const m = await openMaterializer(tableDir, lanceDir, { owner: 'live' });
  const chain = [{ owner: 'live', epoch: 1, start: 0 }];
  m.setOwnership(ownershipOf(1, chain, 99)); // offset 99 not committed yet
  expect(await m.runOnce()).toEqual([]);
  m.setOwnership(ownershipOf(1, chain, 100));
  expect((await m.runOnce()).map((r) => r.rows)).toEqual([100]);
  m.close();
});

describe('permits and source reservation', () => {
  test('a failing task waits for every admitted task; permits and reserved bytes return to zero; nothing is visible', async () => {
    await stageRows(tableDir, { partitions: 1, perPartition: 4_000, rowsPerPart: 1_000 });
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let decodes = 0;
    let maxDecoding = 0;
    let decoding = 0;
    let failedAt = 0;
    let sawBlocked = false;
    const m = await openMaterializer(tableDir, lanceDir, {
      decodePermits: 2,
      fetchPermits: 2,
      sourceReservationBytes: 10 * 1024 * 1024,
      hooks: {
        decoded: async () => {
          decoding += 1;
          maxDecoding = Math.max(maxDecoding, decoding);
          const n = decodes++;
          try {
            if (n === 0) await gate; // a blocking decode
            if (n === 1) {
              failedAt = performance.now();
              throw new Error('injected decode failure');
            }
          } finally {
            decoding -= 1;
          }
        },
      },
    });
    m.setOwnership(ownershipOf(1, chainA, 4_000));
    const run = m.runOnce();
    let settledAt = 0;
    void run.finally(() => (settledAt = performance.now()));
    await new Promise((r) => setTimeout(r, 300));
    // The failure happened, but the blocked decode still holds its permit and reservation: no answer yet.
    expect(failedAt).toBeGreaterThan(0);
    expect(settledAt).toBe(0);
    const during = m.stats();
    sawBlocked = during.permits.find((p) => p.kind === 'decode')!.inUse >= 1 && during.reservation.bytes > 0;
    expect(sawBlocked).toBe(true);
    open();
    // The failure is the publication's alone: counted and retried later, not thrown.
    expect(await run).toEqual([]);
    expect(m.stats()).toMatchObject({ failedPublications: 1, failures: { storage: 1 }, retryingPlans: 1 });
    expect(settledAt).toBeGreaterThan(failedAt);
    expect(maxDecoding).toBeLessThanOrEqual(2);
    const after = m.stats();
    expect(after.permits.map((p) => p.inUse)).toEqual([0, 0]);
    expect(after.reservation.bytes).toBe(0);
    expect(await readLance(lanceDir)).toEqual([]); // nothing partial
    expect(await sealedPartCount(tableDir)).toBe(4); // sources kept
    m.close();

    // The plan is retried from the ledger and publishes once.
    const retry = await openMaterializer(tableDir, lanceDir);
    retry.setOwnership(ownershipOf(1, chainA, 4_000));
    await retry.runOnce();
    expectExactly(await readLance(lanceDir), 1, () => 4_000);
    retry.close();
  });

  test.each(['buffered', 'streamed'] as const)(
    'a publication larger than the source reservation, of parts each larger than it, finishes instead of waiting on itself (%s)',
    async (mode) => {
      await stageRows(tableDir, { partitions: 2, perPartition: 4_000, rowsPerPart: 1_000 });
      const m = await openMaterializer(tableDir, lanceDir, {
        mode,
        // Parts are ~100 KiB: each needs 2× that, and a publication of 4 parts far more.
        sourceReservationBytes: 64 * 1024,
        maxPublicationBytes: 450 * 1024,
      });
      m.setOwnership(ownershipOf(2, chainA, 4_000));
      const results = await settlesWithin(m.runOnce(), 20_000);
      expect(results.length).toBeGreaterThan(1);
      expectExactly(await readLance(lanceDir), 2, () => 4_000);
      expect(m.stats().reservation.bytes).toBe(0);
      m.close();
    },
  );

  test('each publication is reported as it lands, not only when the run ends', async () => {
    await stageRows(tableDir, { partitions: 2, perPartition: 5_000, rowsPerPart: 1_000 });
    const reported: number[] = [];
    const m = await openMaterializer(tableDir, lanceDir, {
      maxPublicationBytes: 300 * 1024,
      onPublished: (result) => reported.push(result.rows),
    });
    m.setOwnership(ownershipOf(2, chainA, 5_000));
    const results = await m.runOnce();
    expect(results.length).toBeGreaterThan(1);
    expect(reported).toEqual(results.map((r) => r.rows));
    m.close();
  });

  test('row counts in Lance only ever move by whole publications', async () => {
    await stageRows(tableDir, { partitions: 2, perPartition: 10_000, rowsPerPart: 1_000 });
    const m = await openMaterializer(tableDir, lanceDir, {
      maxPublicationBytes: 300 * 1024,
      mode: 'streamed',
    });
    m.setOwnership(ownershipOf(2, chainA, 10_000));
    const db = await lancedb.connect(lanceDir, { readConsistencyInterval: 0 });
    const seen = new Set<number>();
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const t = await openTableIfCommitted(db, TABLE);
        if (t) {
          seen.add(await t.countRows());
          t.close();
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const results = await m.runOnce();
    watching = false;
    await watcher;
    // Every count observed is 0 or a sum of whole publications (in any order for streamed).
    const sizes = results.map((r) => r.rows);
    const reachable = new Set([0]);
    for (const s of sizes) for (const r of [...reachable]) reachable.add(r + s);
    for (const count of seen) expect(reachable.has(count)).toBe(true);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(20_000);
    db.close();
    m.close();
  });
});

test('a publication found half in the table stops with an error that says why', async () => {
  await stageRows(tableDir, { partitions: 1, perPartition: 100, rowsPerPart: 100 });
  const m = await openMaterializer(tableDir, lanceDir);
  m.setOwnership(ownershipOf(1, chainA, 100));
  await m.runOnce();
  m.close();
  // A ledger claiming a 'writing' publication of 200 rows of which only 100 are in the table.
  await ledger.writePlan(tableDir, {
    id: 'P1',
    table: TABLE,
    schemaKey: 'x',
    createdAt: 0,
    parts: [],
    rows: 200,
    bytes: 0,
  });
  await ledger.markWriting(tableDir, {
    id: 'P1',
    rows: 200,
    intervals: [{ topic: TOPIC, partition: 0, first: 0, last: 199 }],
  });
  const again = await openMaterializer(tableDir, lanceDir);
  await expect(again.resume()).rejects.toBeInstanceOf(PartialPublicationError);
  await expect(again.resume()).rejects.toThrow(/holds 100 of the 200 rows/);
  again.close();
});

describe('crash points: a real SIGKILL at each, then a restart, ends exactly once', () => {
  const points: CrashPointName[] = [
    // The table's first create has committed, not yet checked (its restore duty is written down).
    'after-create',
    'after-plan',
    'during-prepare',
    'before-add',
    'after-add',
    'after-published',
    // Inside the cleanup: every step of it, in the order it runs.
    'after-sources-deleted',
    'after-plan-forgotten',
    'after-writing-forgotten',
  ];
  test.each(points)('%s', async (point) => {
    await stageRows(tableDir, { partitions: 2, perPartition: 3_000, rowsPerPart: 1_000 });
    const run = (env: NodeJS.ProcessEnv) =>
      new Promise<{ code: number | null; signal: string | null; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [CHILD, tableDir, lanceDir, '2', '3000', 'buffered'], {
          env: { ...process.env, ...env },
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let stderr = '';
        child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
        child.on('exit', (code, signal) => resolve({ code, signal, stderr }));
      });
    const crashed = await run({ KAFKA_LANCE_TEST_CRASH_AT: point });
    expect(crashed.signal).toBe('SIGKILL');
    const restarted = await run({ KAFKA_LANCE_TEST_CRASH_AT: '' });
    expect(restarted).toMatchObject({ code: 0, stderr: '' });
    expectExactly(await readLance(lanceDir), 2, () => 3_000);
    expect(await sealedPartCount(tableDir)).toBe(0);
    expect(await ledgerFiles(tableDir)).toEqual([]);
  });
});

test('a plan left alone after its sources were deleted (a kill inside an older cleanup order) is recognised as done, and others still publish', async () => {
  await stageRows(tableDir, { partitions: 1, perPartition: 200, rowsPerPart: 100 });
  const plansDir = path.join(tableDir, 'plans');
  const saved = new Map<string, string>();
  const m = await openMaterializer(tableDir, lanceDir, {
    hooks: {
      // Keep a copy of the plan file as it was during the publication.
      fetched: async () => {
        for (const name of await fsp.readdir(plansDir))
          if (name.endsWith('.plan.json'))
            saved.set(name, await fsp.readFile(path.join(plansDir, name), 'utf8'));
      },
    },
  });
  m.setOwnership(ownershipOf(1, chainA, 400));
  expect((await m.runOnce()).map((r) => r.rows)).toEqual([200]);
  m.close();
  // The state a kill leaves after `published` and `writing` were removed but not the plan.
  expect(saved.size).toBe(1);
  for (const [name, text] of saved) await fsp.writeFile(path.join(plansDir, name), text);
  await stageRows(tableDir, { partitions: 1, perPartition: 200, rowsPerPart: 100, from: 200 });
  const again = await openMaterializer(tableDir, lanceDir);
  again.setOwnership(ownershipOf(1, chainA, 400));
  await again.runOnce();
  expectExactly(await readLance(lanceDir), 1, () => 400);
  expect(await ledgerFiles(tableDir)).toEqual([]);
  expect(await sealedPartCount(tableDir)).toBe(0);
  again.close();
});

test('a new nullable column in later parts is added to the table; earlier rows read null', async () => {
  await stageRows(tableDir, { partitions: 1, perPartition: 100, rowsPerPart: 100 });
  const m = await openMaterializer(tableDir, lanceDir);
  m.setOwnership(ownershipOf(1, chainA, 200));
  await m.runOnce();
  // Parts of an evolved schema: the same rows plus a `region` column.
  const { minuteKeyOf } = await import('../../src/staging');
  const { Field, Utf8, RecordBatch, Schema, Struct, makeData, vectorFromArray } =
    await import('apache-arrow');
  const { rowsFor, range } = await import('../support/rows');
  const { recordOffset } = await import('../../src/common/offsets');
  const base = rowsFor(TOPIC, 0, range(100, 200));
  const schema = new Schema([...base.schema.fields, new Field('region', new Utf8(), true)]);
  const region = vectorFromArray(
    range(100, 200).map((i) => `r${i % 3}`),
    new Utf8(),
  ).data[0]!;
  const evolved = new RecordBatch(
    schema,
    makeData({
      type: new Struct(schema.fields),
      length: 100,
      nullCount: 0,
      children: [...base.data.children, region],
    }),
  );
  const staging = await openFixtureStaging(tableDir);
  staging.push({
    topic: TOPIC,
    partition: 0,
    batch: evolved,
    minute: minuteKeyOf(Date.now()),
    handledThrough: recordOffset(199),
  });
  await staging.close();
  await m.runOnce();
  expectExactly(await readLance(lanceDir), 1, () => 200);
  const db = await lancedb.connect(lanceDir);
  const t = await db.openTable(TABLE);
  expect((await t.schema()).fields.find((f) => f.name === 'region')?.nullable).toBe(true);
  expect(await t.countRows('region IS NULL')).toBe(100);
  expect(await t.countRows("region = 'r1'")).toBe(34);
  t.close();
  db.close();
  m.close();
});

test('a Lance failure loses nothing: the publication fails, sources stay, and it succeeds once Lance is back', async () => {
  await stageRows(tableDir, { partitions: 1, perPartition: 500, rowsPerPart: 250 });
  // A file where the table directory should be: Lance cannot write there.
  await fsp.mkdir(lanceDir, { recursive: true });
  await fsp.writeFile(path.join(lanceDir, `${TABLE}.lance`), 'not a directory');
  const broken = await openMaterializer(tableDir, lanceDir);
  broken.setOwnership(ownershipOf(1, chainA, 500));
  expect(await broken.runOnce()).toEqual([]);
  expect(broken.stats().failedPublications).toBe(1);
  expect(broken.stats().quarantinedParts).toEqual({}); // a storage failure is never set aside
  expect(await sealedPartCount(tableDir)).toBe(2);
  broken.close();
  await fsp.rm(path.join(lanceDir, `${TABLE}.lance`));
  const fixed = await openMaterializer(tableDir, lanceDir);
  fixed.setOwnership(ownershipOf(1, chainA, 500));
  await fixed.runOnce();
  expectExactly(await readLance(lanceDir), 1, () => 500);
  fixed.close();
});

test('compaction runs only on the replica that owns the first partition, and keeps every row', async () => {
  for (let i = 0; i < 4; i++)
    await stageRows(tableDir, { partitions: 2, perPartition: 50, rowsPerPart: 50, from: i * 50 });
  const follower = await openMaterializer(tableDir, lanceDir, {
    owner: 'someone-else',
    maxPublicationBytes: 1,
  });
  follower.setOwnership(ownershipOf(2, chainA, 200));
  await follower.runOnce();
  expect(await follower.optimizeIfLeader()).toBe(false);
  follower.close();
  const leader = await openMaterializer(tableDir, lanceDir, { owner: 'A' });
  leader.setOwnership(ownershipOf(2, chainA, 200));
  expect(await leader.optimizeIfLeader()).toBe(true);
  expectExactly(await readLance(lanceDir), 2, () => 200);
  leader.close();
});

test("an ended epoch of this replica is cut at the next entry's start even when it regained the partition there", async () => {
  // A staged 0..149 in epoch 1, lost the partition to B at 100 (B consumed nothing),
  // regained it at 100 in epoch 5: A's epoch-1 rows 100..149 belong to epoch 5's re-consumption.
  await stageRows(tableDir, { partitions: 1, perPartition: 150, rowsPerPart: 150, owner: 'A', epoch: 1 });
  const m = await openMaterializer(tableDir, lanceDir, { owner: 'A' });
  const chain = [
    { owner: 'A', epoch: 1, start: 0 },
    { owner: 'B', epoch: 1, start: 100 },
    { owner: 'A', epoch: 5, start: 100 },
  ];
  m.setOwnership(ownershipOf(1, chain, 100));
  expect((await m.runOnce()).map((r) => r.rows)).toEqual([100]);
  expectExactly(await readLance(lanceDir), 1, () => 100);
  m.close();
});
