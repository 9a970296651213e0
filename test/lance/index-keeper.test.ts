import { promises as fsp } from 'node:fs';
import * as lancedb from '@lancedb/lancedb';
import { Field, FixedSizeList, Float32, Int64, Schema, Utf8 } from 'apache-arrow';
import { silentLogger } from '../../src/common/logger';
import { indexSpec, type IndexSpec } from '../../src/config/index-spec';
import { IndexKeeper, type IndexReport } from '../../src/lance/index-keeper';
import { retryConflicts, WorkStoppedError } from '../../src/lance/commit-retry';
import { tempDir } from '../support/rows';

/**
 * The index keeper against a real LanceDB table: nothing is trained on too few rows, a
 * vector index is built once the table can train it, new rows are folded in, a table
 * that outgrew its training is trained again, and appends go on while an index builds.
 */

const DIM = 16;
const schema = new Schema([
  new Field('n', new Int64(), false),
  new Field('emb', new FixedSizeList(DIM, new Field('item', new Float32(), true)), true),
  new Field('service', new Utf8(), true),
]);

function rows(count: number, from: number): Record<string, unknown>[] {
  return Array.from({ length: count }, (_, i) => ({
    n: from + i,
    emb: Array.from({ length: DIM }, (_, j) => Math.sin((from + i) * (j + 1))),
    service: `svc-${(from + i) % 4}`,
  }));
}

let dir: string;
let db: lancedb.Connection;
let table: lancedb.Table;
beforeEach(async () => {
  dir = await tempDir('kl-index-keeper');
  db = await lancedb.connect(dir, { readConsistencyInterval: 0 });
  table = await db.createEmptyTable('docs', schema);
});
afterEach(async () => {
  table.close();
  db.close();
  await fsp.rm(dir, { recursive: true, force: true });
});

const specs = (...input: Record<string, unknown>[]): IndexSpec[] => input.map((i) => indexSpec.parse(i));
const byIndex = (reports: readonly IndexReport[], name: string) => reports.find((r) => r.index === name);

test('a vector index waits for the rows it trains on, then is built; a scalar index is built at once', async () => {
  const keeper = await IndexKeeper.connect(
    { uri: dir, table: 'docs' },
    specs(
      { column: 'emb', type: 'ivf_pq', metric: 'cosine', numPartitions: 2, numSubVectors: 4 },
      { column: 'service', type: 'bitmap' },
    ),
    silentLogger(),
  );
  try {
    await table.add(rows(500, 0));
    let reports = await keeper.maintain();
    expect(byIndex(reports, 'emb_idx')).toMatchObject({
      state: 'waiting-rows',
      indexedRows: 0,
      unindexedRows: 500,
    });
    expect(byIndex(reports, 'service_idx')).toMatchObject({
      state: 'created',
      indexedRows: 500,
      unindexedRows: 0,
    });
    await table.add(rows(100, 500));
    reports = await keeper.maintain();
    // 600 rows ≥ 256 × 2 partitions.
    expect(byIndex(reports, 'emb_idx')).toMatchObject({
      state: 'created',
      indexedRows: 600,
      unindexedRows: 0,
    });
    expect(byIndex(reports, 'service_idx')).toMatchObject({ state: 'updated', unindexedRows: 0 });
    expect((await table.listIndices()).map((i) => [i.name, i.indexType]).sort()).toEqual([
      ['emb_idx', 'IvfPq'],
      ['service_idx', 'Bitmap'],
    ]);
  } finally {
    keeper.close();
  }
});

test('new rows are folded into the index; a table grown past the retrain share is trained again', async () => {
  const keeper = await IndexKeeper.connect(
    { uri: dir, table: 'docs' },
    specs({ column: 'emb', type: 'ivf_flat', metric: 'l2', numPartitions: 2, retrainShare: 0.5 }),
    silentLogger(),
  );
  try {
    await table.add(rows(600, 0));
    expect((await keeper.maintain())[0]).toMatchObject({ state: 'created', indexedRows: 600 });
    await table.add(rows(300, 600));
    // 300 of 900 came after the training: a third, under the share.
    expect((await keeper.maintain())[0]).toMatchObject({
      state: 'updated',
      indexedRows: 900,
      unindexedRows: 0,
    });
    expect((await keeper.maintain())[0]).toMatchObject({ state: 'fresh', unindexedRows: 0 });
    await table.add(rows(400, 900));
    // 700 of 1,300 rows came after the training of 600: more than half.
    expect((await keeper.maintain())[0]).toMatchObject({
      state: 'retrained',
      indexedRows: 1_300,
      unindexedRows: 0,
    });
    const hits = await table
      .vectorSearch(rows(1, 1_000)[0]!.emb as number[])
      .limit(1)
      .toArrow();
    expect(Number(hits.getChild('n')?.get(0))).toBe(1_000);
  } finally {
    keeper.close();
  }
});

test('appends commit while an index is being built on another connection, and the build keeps them', async () => {
  await table.add(rows(20_000, 0));
  let buildBegan!: () => void;
  const began = new Promise<void>((resolve) => (buildBegan = resolve));
  const keeper = await IndexKeeper.connect(
    { uri: dir, table: 'docs' },
    specs({ column: 'emb', type: 'ivf_pq', numPartitions: 8, numSubVectors: 4 }),
    silentLogger(),
    () => {
      buildBegan();
      return () => undefined;
    },
  );
  try {
    let built = false;
    const build = keeper.maintain().then((r) => {
      built = true;
      return r;
    });
    // The append waits for the build only if it shares its lock. It goes in once the build
    // has begun (a busy machine may take long to count rows before it).
    await began;
    await new Promise((r) => setTimeout(r, 50));
    await table.add(rows(100, 20_000));
    const appendedDuringBuild = !built;
    const [report] = await build;
    expect(appendedDuringBuild).toBe(true);
    expect(report).toMatchObject({ state: 'created' });
    expect(await table.countRows()).toBe(20_100);
    // The build read its version before or after the append (the native call has no point
    // to wait on inside it): either the next round folds the appended rows in, or the build
    // already holds them. Either way none is left out.
    const [next] = await keeper.maintain();
    expect(['updated', 'fresh']).toContain(next?.state);
    expect(next).toMatchObject({ indexedRows: 20_100, unindexedRows: 0 });
  } finally {
    keeper.close();
  }
});

test('rows without a vector neither hold the training back nor make every round train again', async () => {
  const keeper = await IndexKeeper.connect(
    { uri: dir, table: 'docs' },
    specs({ column: 'emb', type: 'ivf_flat', numPartitions: 2 }),
    silentLogger(),
  );
  try {
    // Two rows in three have no vector: 600 of 1,800 can train (256 × 2 needed).
    await table.add(rows(1_800, 0).map((r, i) => (i % 3 === 0 ? r : { ...r, emb: null })));
    expect((await keeper.maintain())[0]).toMatchObject({ state: 'created', unindexedRows: 0 });
    expect((await keeper.maintain())[0]).toMatchObject({ state: 'fresh', unindexedRows: 0 });
  } finally {
    keeper.close();
  }
});

test('a round asked to stop begins no build: a stopping replica waits for no index', async () => {
  const keeper = await IndexKeeper.connect(
    { uri: dir, table: 'docs' },
    specs({ column: 'service', type: 'bitmap' }, { column: 'n', type: 'btree' }),
    silentLogger(),
  );
  try {
    await table.add(rows(500, 0));
    const stopping = new AbortController();
    stopping.abort();
    expect(await keeper.maintain(stopping.signal)).toEqual([]);
    expect(await table.listIndices()).toEqual([]);
    // Not stopping: both are built.
    expect((await keeper.maintain()).map((r) => r.state)).toEqual(['created', 'created']);
  } finally {
    keeper.close();
  }
});

test('a commit conflict is not retried once the work is asked to stop', async () => {
  const conflict = new Error('Retryable commit conflict for version 7');
  let calls = 0;
  const stopping = new AbortController();
  const attempt = () => {
    calls++;
    stopping.abort();
    return Promise.reject(conflict);
  };
  await expect(retryConflicts(attempt, 8, stopping.signal)).rejects.toBe(conflict);
  expect(calls).toBe(1);
  // Stopped during the backoff: no further attempt, and the wait ends at once.
  calls = 0;
  const later = new AbortController();
  const stoppedInBackoff = retryConflicts(
    () => {
      calls++;
      setTimeout(() => later.abort(), 5);
      return Promise.reject(conflict);
    },
    8,
    later.signal,
  );
  await expect(stoppedInBackoff).rejects.toBeInstanceOf(WorkStoppedError);
  expect(calls).toBe(1);
  // Already stopped: not even a first attempt.
  calls = 0;
  await expect(retryConflicts(attempt, 8, stopping.signal)).rejects.toBeInstanceOf(WorkStoppedError);
  expect(calls).toBe(0);
  // Without a stop the same conflict is retried.
  calls = 0;
  await expect(
    retryConflicts(() => (++calls < 3 ? Promise.reject(conflict) : Promise.resolve('done'))),
  ).resolves.toBe('done');
  expect(calls).toBe(3);
});
