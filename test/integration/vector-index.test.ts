import * as lancedb from '@lancedb/lancedb';
import { clusteredEmbeddings } from '../../src/cli/clustered-embeddings';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { produceRecords } from '../support/ingestion-fixture';
import { testBrokers } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';
import { openTableIfCommitted } from '../../src/lance/open-if-committed';

/**
 * Declared vector indexes through a real broker and a real replica process: the index is
 * built while records stream in and answers nearest-neighbour queries like a brute-force
 * search over the same rows; it catches up once the producer stops; and a replica killed
 * in the middle of a build loses no row and builds the index after its restart.
 */
const suite = brokerSuite('kl-vectors');
const DIM = 32;

const vectorConsumer = (indexes: unknown[]) =>
  topicAndConsumer(suite, 2, {
    schema: {
      fields: {
        n: { type: 'int64', nullable: false },
        cluster: 'int32',
        emb: { type: 'vector', dim: DIM },
      },
    },
    indexes,
    staging: { maxPartAgeMs: 300 },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200, indexEveryMs: 500 },
  });

async function until<T>(read: () => Promise<T | undefined>, what: string, timeoutMs = 45_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The table on a new connection (as another reader sees it), or undefined before it exists. */
async function withTable<T>(dataDir: string, read: (t: lancedb.Table) => Promise<T>): Promise<T | undefined> {
  const db = await lancedb.connect(`${dataDir}/lance`, { readConsistencyInterval: 0 });
  try {
    const t = await openTableIfCommitted(db, 'logs');
    if (!t) return undefined;
    try {
      return await read(t);
    } finally {
      t.close();
    }
  } finally {
    db.close();
  }
}

const l2 = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += (a[i]! - b[i]!) ** 2;
  return s;
};

test('a vector index built while records stream in finds at least 0.9 of the true 10 nearest neighbours, and covers every row once the producer stops', async () => {
  const { topic, file } = await vectorConsumer([
    { column: 'emb', type: 'ivf_pq', metric: 'l2', numPartitions: 4, numSubVectors: 16, minRows: 1_024 },
  ]);
  const data = clusteredEmbeddings({ dim: DIM, clusters: 12, seed: 7 });
  const points = Array.from({ length: 4_000 }, () => data.next());
  const dataDir = await tempDir('kl-vectors-run');
  const replica = new ReplicaProcess(file, dataDir, testBrokers());
  await replica.waitForEvent('kafka.join');
  const value = (n: number) => JSON.stringify({ n, cluster: points[n]!.cluster, emb: points[n]!.vector });
  // Eight rounds, each published before the next: the index is built on the first rows and
  // kept up as the rest arrive.
  for (let round = 0; round < 8; round++) {
    await produceRecords(suite.kafka, topic, 2, 500, value, round * 500);
    await new Promise((r) => setTimeout(r, 400));
  }
  const producerStopped = Date.now();
  const created = await replica.waitFor((l) => l.event === 'lance.index.created' && l.index === 'emb_idx');
  expect(created.indexedRows as number).toBeGreaterThanOrEqual(1_024);
  expect(created.indexedRows as number).toBeLessThan(4_000);

  // Freshness: once the producer stopped, every row is in the index (updated incrementally).
  const stats = await until(
    () =>
      withTable(dataDir, async (t) => {
        const s = await t.indexStats('emb_idx');
        return s && (await t.countRows()) === 4_000 && s.numUnindexedRows === 0 ? s : undefined;
      }),
    'all 4,000 rows published and indexed',
  );
  // A figure for the record (indexEveryMs 500 ms here), not an assertion on speed.
  console.log(
    `every row published and indexed ${((Date.now() - producerStopped) / 1000).toFixed(1)} s after the producer stopped`,
  );
  expect(stats).toMatchObject({ numIndexedRows: 4_000, numUnindexedRows: 0, indexType: 'IVF_PQ' });
  expect(
    replica.logs.some((l) => l.event === 'lance.index.updated' || l.event === 'lance.index.retrained'),
  ).toBe(true);

  // Recall@10 against brute force over the rows the table holds.
  const recall = await withTable(dataDir, async (t) => {
    const all = await t.query().select(['n', 'emb']).toArrow();
    const ns = all.getChild('n')!.toArray() as BigInt64Array;
    const embs = all.getChild('emb')!;
    const stored = Array.from({ length: all.numRows }, (_, i) => ({
      n: Number(ns[i]),
      v: (embs.get(i) as { toArray(): Float32Array }).toArray(),
    }));
    let found = 0;
    const queries = 20;
    for (let q = 0; q < queries; q++) {
      const query = data.near(q % data.clusters);
      const truth = new Set(
        stored
          .map((r) => ({ n: r.n, d: l2(query, r.v) }))
          .sort((a, b) => a.d - b.d)
          .slice(0, 10)
          .map((r) => r.n),
      );
      const search = t
        .vectorSearch(query)
        .column('emb')
        .distanceType('l2')
        .nprobes(4)
        .refineFactor(10)
        .limit(10);
      expect(await search.explainPlan()).toContain('ANNSubIndex');
      const hits = await search.toArrow();
      const got = Array.from(hits.getChild('n')!.toArray() as BigInt64Array, Number);
      found += got.filter((n) => truth.has(n)).length;
    }
    return found / (queries * 10);
  });
  console.log(`recall@10 of the live IVF_PQ index over 4,000 rows: ${recall}`);
  expect(recall).toBeGreaterThanOrEqual(0.9);
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
}, 90_000);

test('a replica killed in the middle of an index build loses no row, and builds the index after its restart', async () => {
  const { topic, file } = await vectorConsumer([
    { column: 'emb', type: 'ivf_pq', numPartitions: 16, numSubVectors: 8, minRows: 4_096 },
  ]);
  const data = clusteredEmbeddings({ dim: DIM, clusters: 8, seed: 11 });
  await produceRecords(suite.kafka, topic, 2, 6_000, (n) => {
    const p = data.next();
    return JSON.stringify({ n, cluster: p.cluster, emb: p.vector });
  });
  const dataDir = await tempDir('kl-vectors-crash');
  const crashing = new ReplicaProcess(file, dataDir, testBrokers(), {
    KAFKA_LANCE_TEST_CRASH_AT: 'during-index-build',
  });
  await crashing.waitForEvent('lance.index.build');
  expect(await crashing.exited).toEqual({ code: null, signal: 'SIGKILL' });
  // Killed before the build committed: the table has no such index.
  const before = await withTable(dataDir, async (t) => ({
    rows: await t.countRows(),
    indexes: (await t.listIndices()).map((i) => i.name),
  }));
  expect(before?.indexes).not.toContain('emb_idx');

  const replica = new ReplicaProcess(file, dataDir, testBrokers());
  const rows = await until(
    () =>
      withTable(dataDir, async (t) => {
        const s = await t.indexStats('emb_idx');
        if (!s || s.numUnindexedRows > 0 || (await t.countRows()) < 6_000) return undefined;
        return (await t.query().select(['n']).toArrow()).getChild('n')!.toArray() as BigInt64Array;
      }),
    'the index built over all 6,000 rows after the restart',
  );
  expect(rows.length).toBe(6_000);
  expect(new Set(Array.from(rows, Number)).size).toBe(6_000);
  expect(replica.logs.some((l) => l.event === 'lance.index.created' && l.index === 'emb_idx')).toBe(true);
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
}, 90_000);
