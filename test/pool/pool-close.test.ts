/**
 * Regression: a batch admitted after `pool.close()` during a
 * graceful stop reached a closed (or exited) worker and came back as a fatal
 * StagingWorkerError: a clean SIGTERM ended as a failure exit. It must be refused
 * cleanly instead: nothing staged, nothing fatal; Kafka redelivers it.
 *
 * Every test runs on both kinds of lane: a worker thread (`workers: 1`) and the main
 * thread (`workers: 0`). The workers load dist/: run `npm run build` first.
 */
import { promises as fsp } from 'node:fs';
import { StagingPoolClosedError } from '../../src/pool/staging-pool';
import type { PackableMessage } from '../../src/pool/packed-messages';
import { readSealedRows, tempDir } from '../support/rows';
import { STAGING_LANES, jsonConsumer, startTestPool } from '../support/staging-pool-fixture';

let dir: string;
beforeEach(async () => {
  dir = await tempDir('kl-pool-close');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

const messages = (from: number, count: number): PackableMessage[] =>
  Array.from({ length: count }, (_, i) => ({
    offset: String(from + i),
    timestamp: String(Date.UTC(2026, 10, 30, 12) + from + i),
    key: null,
    value: Buffer.from(JSON.stringify({ message: `m${from + i}` })),
  }));

const startPool = (workers: number, maxQueueRecords: number, consumer = jsonConsumer('closing')) =>
  startTestPool({ dir, workers, consumer, table: 'closing', maxQueueRecords });

describe.each(STAGING_LANES)('a batch admitted during a graceful stop, staged on %s', (_lane, workers) => {
  test('a batch admitted after pool.close() is refused cleanly: nothing staged, nothing fatal', async () => {
    const { pool, fatal, tableDir } = await startPool(workers, 1_000);
    const { done } = await pool.admit('t', 0, messages(0, 10), 0, 9);
    await done;
    await pool.close();
    await expect(pool.admit('t', 0, messages(10, 10), 0, 19)).rejects.toBeInstanceOf(StagingPoolClosedError);
    await new Promise((r) => setTimeout(r, 50));
    expect(fatal).toEqual([]);
    expect((await readSealedRows(tableDir)).map((r) => r.offset)).toEqual(
      Array.from({ length: 10 }, (_, i) => i),
    );
  });

  test('a batch waiting for queue room when close() starts is refused once room frees up, never sent to the closing worker', async () => {
    const { pool, fatal, tableDir } = await startPool(workers, 10);
    const first = await pool.admit('t', 0, messages(0, 10), 0, 9);
    // The queue is full: this one waits for the first batch's room.
    const late = pool
      .admit('t', 0, messages(10, 10), 0, 19)
      .then(async ({ done }) => ({ admitted: await done.catch((error: unknown) => error) }))
      .catch((error: unknown) => ({ refused: error }));
    const closing = pool.close();
    await first.done;
    await closing;
    expect(await late).toEqual({ refused: expect.any(StagingPoolClosedError) as unknown });
    await new Promise((r) => setTimeout(r, 50));
    expect(fatal).toEqual([]);
    expect((await readSealedRows(tableDir)).map((r) => r.offset)).toEqual(
      Array.from({ length: 10 }, (_, i) => i),
    );
    expect(pool.queue().records).toBe(0);
  });
});

test.each(STAGING_LANES)(
  'a multi-row transform stages on %s without an offset-order failure',
  async (_lane, workers) => {
    // Record n yields n % 3 rows, numbered in _row, all with the record's offset.
    const consumer = {
      file: 'multi.js',
      text: `module.exports = {
      name: 'closing',
      topics: ['t'],
      schema: { fields: { message: 'string' } },
      transform: (r) => Array.from({ length: Number(r.offset) % 3 }, (_, i) => ({ message: r.value.message + '/' + i })),
    };`,
    };
    const { pool, fatal, tableDir } = await startPool(workers, 1_000, consumer);
    const results = [];
    for (let from = 0; from < 30; from += 10) {
      const { done } = await pool.admit('t', 0, messages(from, 10), 0, from + 9);
      results.push(await done);
    }
    await pool.close();
    expect(fatal).toEqual([]);
    expect(results.reduce((n, r) => n + r.staged, 0)).toBe(30);
    const offsets = (await readSealedRows(tableDir)).map((r) => r.offset);
    const expected = Array.from({ length: 30 }, (_, o) => Array<number>(o % 3).fill(o)).flat();
    expect(offsets).toEqual(expected);
  },
);
