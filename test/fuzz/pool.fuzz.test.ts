/**
 * Fuzzed records through the real staging worker pool never fail a
 * worker; each is a staged row or a dead letter with a reason. Run `npm run build` first.
 */
import { promises as fsp } from 'node:fs';
import { tempDir } from '../support/rows';
import { fuzzThroughPool } from './pool-fuzz';

const SEED = Number(process.env.FUZZ_SEED ?? 1313);

test.each(['declared', 'infer'] as const)(
  'fuzzed records through the staging worker pool (%s schema): no worker fails, each record a row or a dead letter',
  async (schema) => {
    const dir = await tempDir('kl-pool-fuzz');
    try {
      const report = await fuzzThroughPool(1_000, SEED, dir, schema);
      console.log(
        `${schema}: ${report.records} records, ${report.rows} rows, dead letters ${JSON.stringify(report.deadLetters)}`,
      );
      expect(report.problems).toEqual([]);
      expect(report.records).toBe(1_000);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  },
);
