import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { silentLogger } from '../../src/common/logger';
import { StagingPool } from '../../src/pool/staging-pool';
import type { BatchDone } from '../../src/pool/protocol';
import { readSealedPart } from '../../src/staging';
import { parsePartName } from '../../src/staging/part-name';
import { FUZZ_FIELDS, fuzzValue, type FuzzValue } from './arbitraries';

/**
 * Fuzzed records through the real staging worker pool (worker threads from dist/): no worker fails (no fatal, no error reply), and every record ends either
 * as a staged row or as a dead letter with a reason, never both, never neither.
 */
export interface PoolFuzzReport {
  readonly records: number;
  readonly rows: number;
  readonly deadLetters: Readonly<Record<string, number>>;
  readonly problems: readonly string[];
}

const PARTITIONS = 2;
const BATCH = 50;

export async function fuzzThroughPool(
  records: number,
  seed: number,
  workDir: string,
  schema: 'declared' | 'infer' = 'declared',
): Promise<PoolFuzzReport> {
  const dir = await fsp.mkdtemp(path.join(workDir, 'pool-fuzz-'));
  const consumerPath = path.join(dir, 'fuzz.json');
  await fsp.writeFile(
    consumerPath,
    JSON.stringify({
      name: 'fuzz',
      topics: ['fuzz'],
      table: 'fuzz',
      schema:
        schema === 'declared'
          ? {
              fields: Object.fromEntries(
                FUZZ_FIELDS.map((f) => [f.name, { type: f.type, nullable: f.nullable }]),
              ),
            }
          : 'infer',
      errors: { tolerance: 'all' },
    }),
  );
  const tableDir = path.join(dir, 'staging', 'fuzz');
  const problems: string[] = [];
  const dead = new Map<string, string>();
  const pool = await StagingPool.start({
    workers: 2,
    consumerPath,
    brokers: ['127.0.0.1:1'],
    tableDir,
    epoch: { owner: 'fuzz', epoch: 0 },
    maxPartBytes: 1 << 30,
    maxPartAgeMs: 1 << 30,
    maxOpenParts: 8,
    maxQueueRecords: 10_000,
    maxQueueBytes: 1 << 30,
    logger: silentLogger(),
    onBatchDone: (topic: string, partition: number, result: BatchDone) => {
      for (const d of result.deadLetters) {
        const key = `${partition}:${d.offset}`;
        if (dead.has(key)) problems.push(`${key} dead-lettered twice`);
        if (!d.reason || !d.detail) problems.push(`${key} dead letter without reason or detail`);
        dead.set(key, d.reason);
      }
    },
    onFatal: (error) => problems.push(`fatal: ${error.message}`),
  });
  const values: FuzzValue[] = fc.sample(fuzzValue, { numRuns: records, seed });
  const expected = new Map<string, FuzzValue>();
  const next = Array.from({ length: PARTITIONS }, () => 0);
  const now = Date.UTC(2026, 10, 30, 12);
  try {
    const done: Promise<unknown>[] = [];
    for (let i = 0; i < values.length; i += BATCH) {
      const partition = (i / BATCH) % PARTITIONS;
      const messages = values.slice(i, i + BATCH).map((v) => {
        const offset = next[partition]!++;
        expected.set(`${partition}:${offset}`, v);
        return {
          offset: String(offset),
          timestamp: String(now + offset),
          key: null,
          value: v.value === null ? null : Buffer.from(v.value),
        };
      });
      const through = messages.length > 0 ? Number(messages[messages.length - 1]!.offset) : -1;
      const admitted = await pool.admit('fuzz', partition, messages, 0, through);
      done.push(admitted.done.catch((error: Error) => problems.push(`batch failed: ${error.message}`)));
    }
    await Promise.all(done);
    await pool.sync();
  } finally {
    await pool.close().catch((error: Error) => problems.push(`close failed: ${error.message}`));
  }
  const staged = new Set<string>();
  for (const name of await fsp.readdir(tableDir)) {
    if (parsePartName(name)?.state !== 'sealed') continue;
    const { batches } = await readSealedPart(path.join(tableDir, name));
    for (const b of batches) {
      for (let i = 0; i < b.numRows; i++) {
        const key = `${b.getChild('_partition')!.get(i) as number}:${Number(b.getChild('_offset')!.get(i) as bigint)}`;
        if (staged.has(key)) problems.push(`${key} staged twice`);
        staged.add(key);
      }
    }
  }
  const counts: Record<string, number> = {};
  for (const [key, v] of expected) {
    const reason = dead.get(key);
    if (reason !== undefined) counts[reason] = (counts[reason] ?? 0) + 1;
    if (staged.has(key) === (reason !== undefined))
      problems.push(
        `${key}: ${staged.has(key) ? 'both a row and a dead letter' : 'neither a row nor a dead letter'}`,
      );
    if (schema === 'declared' && v.kind === 'valid' && !staged.has(key))
      problems.push(`${key}: a valid record was dead-lettered (${reason})`);
  }
  await fsp.rm(dir, { recursive: true, force: true });
  return { records: expected.size, rows: staged.size, deadLetters: counts, problems: problems.slice(0, 20) };
}
