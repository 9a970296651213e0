import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { testBrokers } from '../support/kafka';
import { tempDir } from '../support/rows';
import { runBounded } from '../support/run-bounded';

const BIN = path.resolve(__dirname, '../../bin/kafka-lance');

test('demo --vectors: the index is trained on the streamed documents, and the nearest neighbours of a query come from the live table with their distances', async () => {
  const dir = await tempDir('kl-vector-demo');
  const out = runBounded(
    process.execPath,
    [BIN, 'demo', '--vectors', '--seconds', '6', '--rate', '500', '--data-dir', dir],
    { env: { ...process.env, KAFKA_BOOTSTRAP_SERVERS: testBrokers().join(',') } },
  );
  expect(out.stderr).toBe('');
  expect(out.status).toBe(0);
  // No JSON log line reaches the terminal.
  expect(out.stdout.split('\n').filter((l) => l.trim().startsWith('{'))).toEqual([]);
  // consumers/documents.ts trains on 2,048 rows (8 partitions × 256) or more: how many
  // depends on when its 5 s round falls (test/integration/vector-index.test.ts proves the
  // build while records stream in).
  const trained = /^Index +embedding_idx trained \d+ time\(s\), at (\d+)[\d, ]* of 3000 documents/m.exec(
    out.stdout,
  );
  expect(trained).toBeTruthy();
  expect(Number(trained![1])).toBeGreaterThanOrEqual(2_048);
  expect(Number(trained![1])).toBeLessThanOrEqual(3_000);
  const hits = [...out.stdout.matchAll(/^ +(\d+) +(\d\.\d{4}) +(\S+) +\S+ note \d+$/gm)];
  expect(hits).toHaveLength(5);
  const distances = hits.map((h) => Number(h[2]));
  expect([...distances].sort((a, b) => a - b)).toEqual(distances);
  // The query is drawn near the "kafka" documents: its neighbours are about kafka.
  expect(hits.map((h) => h[3])).toEqual(Array(5).fill('kafka'));
  expect(out.stdout).toMatch(
    /^ {2}index embedding_idx on embedding \(IvfPq, cosine\): 3,000 indexed, 0 unindexed$/m,
  );
  await fsp.rm(dir, { recursive: true, force: true });
}, 120_000);
