/**
 * Both kinds of staging lane, a worker thread (`workers: 1`) and the main thread
 * (`workers: 0`), run the same StagingService: these tests hold them to the same
 * answers where they differ in how a batch and a reply travel. The workers load dist/:
 * run `npm run build` first.
 */
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { DiskFullError } from '../../src/common/errors';
import { NO_FAULTS } from '../../src/faults/faults';
import { shareFaults } from '../../src/faults/thread-faults';
import type { PackableMessage } from '../../src/pool/packed-messages';
import type { BatchDone } from '../../src/pool/protocol';
import { readSealedRows, tempDir } from '../support/rows';
import {
  STAGING_LANES,
  jsonConsumer,
  startTestPool,
  type ConsumerFile,
} from '../support/staging-pool-fixture';

let dir: string;
beforeEach(async () => {
  dir = await tempDir('kl-lanes');
});
afterEach(async () => {
  shareFaults(NO_FAULTS);
  await fsp.rm(dir, { recursive: true, force: true });
});

/** Values as kafkajs hands them: views into one fetch buffer, not buffers of their own. */
function fetched(from: number, values: readonly string[]): PackableMessage[] {
  const response = Buffer.from(values.join(''));
  let at = 0;
  return values.map((v, i) => {
    const value = response.subarray(at, (at += Buffer.byteLength(v)));
    return { offset: String(from + i), timestamp: String(Date.UTC(2026, 11, 4) + i), key: null, value };
  });
}

const JSON_CONSUMER = jsonConsumer('lanes');

const startPool = (
  workers: number,
  consumer: ConsumerFile = JSON_CONSUMER,
  onBatchDone?: (result: BatchDone) => void,
) => startTestPool({ dir, workers, consumer, table: 'lanes', ...(onBatchDone ? { onBatchDone } : {}) });

describe.each(STAGING_LANES)('staged on %s', (_lane, workers) => {
  test('rows decoded from views into a fetch buffer are staged whole, and a bad record becomes a dead letter', async () => {
    const { pool, fatal, done, tableDir } = await startPool(workers);
    const values = ['{"message":"a"}', '{"message":"é ✓"}', 'not json', '{"message":"d"}'];
    const admitted = await pool.admit('t', 0, fetched(10, values), 0, 13);
    const result = await admitted.done;
    expect(result).toMatchObject({ dropped: false, staged: 3 });
    expect(result.deadLetters.map((d) => d.offset)).toEqual([12]);
    expect(done).toHaveLength(1);
    expect(pool.queue().bytes).toBe(0);
    const [report] = await pool.sync();
    expect(report!.offsets).toEqual([['t', 0, 13]]);
    await pool.close();
    expect(fatal).toEqual([]);
    const rows = await readSealedRows(tableDir);
    expect(rows.map((r) => [r.offset, r.message])).toEqual([
      [10, 'a'],
      [11, 'é ✓'],
      [13, 'd'],
    ]);
  });

  test('a full disk is a DiskFullError that is not fatal, and the same batch stages once the disk has room', async () => {
    const flag = path.join(dir, 'disk-full');
    shareFaults({ ...NO_FAULTS, diskFullFlags: { staging: flag } });
    const { pool, fatal, tableDir } = await startPool(workers);
    await fsp.writeFile(flag, '');
    await (
      await pool.admit('t', 0, fetched(0, ['{"message":"x"}']), 0, 0)
    ).done;
    await expect(pool.sync()).rejects.toBeInstanceOf(DiskFullError);
    await fsp.rm(flag);
    const [report] = await pool.sync();
    expect(report!.offsets).toEqual([['t', 0, 0]]);
    await pool.close();
    expect(fatal).toEqual([]);
    expect((await readSealedRows(tableDir)).map((r) => r.offset)).toEqual([0]);
  });

  test('a batch admitted while a sync is under way is not reported durable by it, and the next sync reports it', async () => {
    const { pool, fatal } = await startPool(workers);
    await (
      await pool.admit('t', 0, fetched(0, ['{"message":"a"}', '{"message":"b"}']), 0, 1)
    ).done;
    const syncing = pool.sync();
    const later = await pool.admit('t', 0, fetched(2, ['{"message":"c"}']), 0, 2);
    const [report] = await syncing;
    expect(report!.offsets).toEqual([['t', 0, 1]]);
    await later.done;
    const [next] = await pool.sync();
    expect(next!.offsets).toEqual([['t', 0, 2]]);
    await pool.close();
    expect(fatal).toEqual([]);
  });

  test('a transform that writes into its record bytes leaves the fetched bytes, which dead letters are read from, as they were', async () => {
    const consumer = {
      file: 'scribbler.js',
      text: `module.exports = {
        name: 'lanes',
        topics: ['t'],
        format: 'raw',
        schema: { fields: { message: 'string' } },
        transform: (r) => { r.value.fill(0x2a); if (r.key) r.key.fill(0x2a); throw new Error('refused'); },
      };`,
    };
    const { pool, fatal } = await startPool(workers, consumer);
    const messages = fetched(0, ['first value', 'second value']).map((m) => ({
      ...m,
      key: Buffer.from('k'),
    }));
    const result = await (await pool.admit('t', 0, messages, 0, 1)).done;
    expect(result.deadLetters.map((d) => d.offset)).toEqual([0, 1]);
    expect(messages.map((m) => [m.key.toString(), m.value!.toString()])).toEqual([
      ['k', 'first value'],
      ['k', 'second value'],
    ]);
    await pool.close();
    expect(fatal).toEqual([]);
  });
});

describe('staged on the main thread', () => {
  test('batches queued together are staged one event-loop turn apart, so timers run between them', async () => {
    const { pool } = await startPool(0);
    const order: string[] = [];
    const dones = [];
    for (let b = 0; b < 3; b++) {
      const { done } = await pool.admit('t', 0, fetched(b * 10, ['{"message":"x"}']), 0, b * 10);
      dones.push(done.then(() => order.push(`batch ${b}`)));
    }
    setImmediate(() => order.push('timer'));
    await Promise.all(dones);
    expect(order).toHaveLength(4);
    expect(order.indexOf('timer')).toBeLessThan(order.indexOf('batch 2'));
    await pool.close();
  });

  test('a batch whose report cannot be recorded fails, and so does the lane: nothing after it is staged', async () => {
    let reports = 0;
    const { pool, fatal, tableDir } = await startPool(0, JSON_CONSUMER, () => {
      if (++reports === 1) throw new Error('tracker refused the report');
    });
    const first = await pool.admit('t', 0, fetched(0, ['{"message":"a"}']), 0, 0);
    const second = await pool.admit('t', 0, fetched(1, ['{"message":"b"}']), 0, 1);
    await expect(first.done).rejects.toThrow(/tracker refused the report/);
    await expect(second.done).rejects.toThrow(/staging on the main thread failed/);
    expect(fatal).toHaveLength(1);
    expect(pool.queue().records).toBe(0);
    await expect(pool.sync()).rejects.toThrow(/staging on the main thread failed/);
    // A close would seal what was pushed: a failed lane runs nothing more.
    await expect(pool.close()).rejects.toThrow(/staging on the main thread failed/);
    await new Promise((r) => setTimeout(r, 500)); // time for a close that ran anyway to seal
    expect(await readSealedRows(tableDir)).toEqual([]);
  });
});
