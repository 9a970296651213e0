import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { silentLogger } from '../../src/common/logger';
import type { BatchDone } from '../../src/pool/protocol';
import { StagingPool } from '../../src/pool/staging-pool';

/**
 * A staging pool started the way the tests of its lanes need it: over a consumer
 * definition written to `dir`, with parts that never seal by size or age, and every
 * fatal error and finished batch collected for the test to assert on.
 */

/** Both kinds of staging lane, for `describe.each`: a worker thread (1) and the main thread (0). */
export const STAGING_LANES = [
  ['a worker thread', 1],
  ['the main thread', 0],
] as const;

export interface ConsumerFile {
  readonly file: string;
  readonly text: string;
}

/** A JSON consumer named `name` of topic `t`, with one string field `message`. */
export const jsonConsumer = (name: string): ConsumerFile => ({
  file: 'consumer.json',
  text: JSON.stringify({ name, topics: ['t'], schema: { fields: { message: 'string' } } }),
});

export interface TestPoolOptions {
  readonly dir: string;
  readonly workers: number;
  readonly consumer: ConsumerFile;
  /** The staging directory's table name under `<dir>/staging`. */
  readonly table: string;
  readonly maxQueueRecords?: number;
  readonly onBatchDone?: (result: BatchDone) => void;
}

export async function startTestPool(options: TestPoolOptions) {
  const consumerPath = path.join(options.dir, options.consumer.file);
  await fsp.writeFile(consumerPath, options.consumer.text);
  const fatal: Error[] = [];
  const done: BatchDone[] = [];
  const tableDir = path.join(options.dir, 'staging', options.table);
  const pool = await StagingPool.start({
    workers: options.workers,
    consumerPath,
    brokers: ['127.0.0.1:1'],
    tableDir,
    epoch: { owner: 'o', epoch: 0 },
    maxPartBytes: 1 << 30,
    maxPartAgeMs: 1 << 30,
    maxOpenParts: 8,
    maxQueueRecords: options.maxQueueRecords ?? 1_000,
    maxQueueBytes: 1 << 30,
    logger: silentLogger(),
    onBatchDone: (_topic, _partition, result) => {
      done.push(result);
      options.onBatchDone?.(result);
    },
    onFatal: (error) => fatal.push(error),
  });
  return { pool, fatal, done, tableDir };
}
