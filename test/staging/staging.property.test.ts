import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { ulid } from 'ulid';
import { silentLogger } from '../../src/common/logger';
import { parseTpKey, recordOffset, tpKey, type DurableOffset } from '../../src/common/offsets';
import { FileLocks, minuteKeyOf, recoverTableStaging, type StagingEpoch } from '../../src/staging';
import { openStaging, partFiles, payloadOf, range, readSealedRows, rowsFor, tempDir } from '../support/rows';
import type { StagingHarness } from '../support/rows';

/**
 * Random sequences of push / sync / flush / crash-and-recover. A crash abandons the
 * staging object without sealing anything, then tears every open part at a random
 * point after its last reported-durable size and appends garbage (a write cut short).
 * Recovery runs, and a new epoch starts at the last durable offsets + 1, as it would
 * from the broker's committed offsets.
 *
 * Checked at the end: under the ceiling rule (an epoch's rows count below the next
 * epoch's start), every record pushed appears exactly once, with its bytes intact;
 * so every record reported durable was recovered exactly once.
 */
const TOPIC = 'prop';
const PARTITIONS = [0, 1, 2];

type Action =
  | { kind: 'push'; partition: number; rows: number; back: number; minuteShift: number }
  | { kind: 'sync' }
  | { kind: 'syncUnreported' }
  | { kind: 'flush'; force: boolean }
  | { kind: 'advance'; ms: number }
  | { kind: 'crash'; tear: number; garbage: number[] };

const action: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('push' as const),
      partition: fc.constantFrom(...PARTITIONS),
      rows: fc.integer({ min: 0, max: 40 }),
      back: fc.integer({ min: 0, max: 15 }),
      minuteShift: fc.integer({ min: 0, max: 2 }),
    }),
  },
  { weight: 3, arbitrary: fc.constant({ kind: 'sync' as const }) },
  { weight: 2, arbitrary: fc.constant({ kind: 'syncUnreported' as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('flush' as const), force: fc.boolean() }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 90_000 }) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('crash' as const),
      tear: fc.double({ min: 0, max: 1, noNaN: true }),
      garbage: fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 24 }),
    }),
  },
);

interface EpochRecord {
  readonly epoch: StagingEpoch;
  /** First offset per partition this epoch consumed; the previous epoch's ceiling. */
  readonly start: Map<number, number>;
}

async function runScenario(actions: readonly Action[]): Promise<void> {
  const dir = await tempDir('kl-prop');
  try {
    const next = new Map(PARTITIONS.map((p) => [p, 0]));
    const durable = new Map(PARTITIONS.map((p) => [p, -1]));
    const epochs: EpochRecord[] = [];
    /** Bytes of each open part known durable: its size at the last reported sync. */
    let reportedSizes = new Map<string, number>();

    const open = async (): Promise<StagingHarness> => {
      const epoch = { owner: ulid(), epoch: 1 };
      epochs.push({ epoch, start: new Map(PARTITIONS.map((p) => [p, durable.get(p)! + 1])) });
      const highWaters = new Map(PARTITIONS.map((p) => [tpKey(TOPIC, p), durable.get(p)! as DurableOffset]));
      return openStaging(dir, { epoch, highWaters, maxPartBytes: 6_000, maxPartAgeMs: 30_000 });
    };
    const recordSizes = async () => {
      reportedSizes = new Map();
      for (const name of await partFiles(dir, 'open')) {
        reportedSizes.set(name, (await fsp.stat(path.join(dir, name))).size);
      }
    };
    const credit = (offsets: ReadonlyMap<ReturnType<typeof tpKey>, DurableOffset>) => {
      for (const [key, offset] of offsets) {
        const { partition } = parseTpKey(key);
        expect(offset).toBeGreaterThanOrEqual(durable.get(partition)!);
        durable.set(partition, offset);
      }
    };

    let h = await open();
    for (const a of actions) {
      switch (a.kind) {
        case 'push': {
          // Kafka may redeliver up to `back` records already handed to staging.
          const from = Math.max(epochs.at(-1)!.start.get(a.partition)!, next.get(a.partition)! - a.back);
          const to = Math.max(from, from + a.rows);
          if (to === from) break;
          h.staging.push({
            topic: TOPIC,
            partition: a.partition,
            batch: rowsFor(TOPIC, a.partition, range(from, to)),
            minute: minuteKeyOf(h.clock.now + a.minuteShift * 60_000),
            handledThrough: recordOffset(to - 1),
          });
          next.set(a.partition, Math.max(next.get(a.partition)!, to));
          break;
        }
        case 'sync':
          credit(await h.staging.sync());
          await recordSizes();
          break;
        case 'syncUnreported':
          // Written and fsynced, but the process "dies" before the offsets are used.
          await h.staging.sync();
          break;
        case 'flush':
          await h.staging.flush({ force: a.force });
          break;
        case 'advance':
          h.clock.now += a.ms;
          break;
        case 'crash': {
          // The abandoned instance still runs (a real crash would stop it): let its
          // queued file work (a part opening, waiting for a file slot) reach the disk
          // first, unreported, so nothing it does lands after recovery.
          await h.staging.sync().catch(() => undefined);
          for (const name of await partFiles(dir, 'open')) {
            const file = path.join(dir, name);
            const size = (await fsp.stat(file)).size;
            const safe = Math.min(size, reportedSizes.get(name) ?? 0);
            await fsp.truncate(file, safe + Math.floor(a.tear * (size - safe)));
            await fsp.appendFile(file, Uint8Array.from(a.garbage));
          }
          const report = await recoverTableStaging({
            tableDir: dir,
            locks: new FileLocks(),
            owner: 'recovery',
            logger: silentLogger(),
          });
          expect(report.quarantined).toEqual([]);
          expect(await partFiles(dir, 'open')).toEqual([]);
          for (const p of PARTITIONS) next.set(p, durable.get(p)! + 1);
          reportedSizes = new Map();
          h = await open();
          break;
        }
      }
    }
    credit(await h.staging.sync());
    await h.staging.close();

    const rows = await readSealedRows(dir);
    const ceilingOf = (owner: string, partition: number): number => {
      const i = epochs.findIndex((e) => e.epoch.owner === owner);
      expect(i).toBeGreaterThanOrEqual(0);
      return i + 1 < epochs.length ? epochs[i + 1]!.start.get(partition)! : Number.POSITIVE_INFINITY;
    };
    const counted = new Map(PARTITIONS.map((p) => [p, new Set<number>()]));
    for (const r of rows) {
      if (r.offset >= ceilingOf(r.epoch.owner, r.partition)) continue; // cut: re-consumed by the next epoch
      const seen = counted.get(r.partition)!;
      if (seen.has(r.offset)) throw new Error(`record ${r.partition}:${r.offset} staged twice`);
      seen.add(r.offset);
      expect(r.message).toBe(payloadOf(TOPIC, r.partition, r.offset));
    }
    for (const p of PARTITIONS) {
      expect(durable.get(p)).toBe(next.get(p)! - 1);
      expect([...counted.get(p)!].sort((a, b) => a - b)).toEqual(range(0, next.get(p)!));
    }
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

describe('staging property: durable records are recovered exactly once', () => {
  test('random push / sync / flush / crash-and-recover sequences', async () => {
    await fc.assert(fc.asyncProperty(fc.array(action, { minLength: 1, maxLength: 60 }), runScenario), {
      numRuns: 60,
      ...(process.env.KL_PROPERTY_SEED
        ? { seed: Number(process.env.KL_PROPERTY_SEED), path: process.env.KL_PROPERTY_PATH }
        : {}),
    });
  });

  test('a fixed scenario with crashes between unreported syncs', async () => {
    const push = (partition: number, rows: number, minuteShift = 0): Action => ({
      kind: 'push',
      partition,
      rows,
      back: 3,
      minuteShift,
    });
    await runScenario([
      push(0, 30),
      push(1, 10, 1),
      { kind: 'sync' },
      push(0, 20, 2),
      { kind: 'syncUnreported' },
      { kind: 'crash', tear: 0.5, garbage: [255, 255, 255, 255, 1] },
      push(0, 15),
      { kind: 'flush', force: false },
      { kind: 'advance', ms: 61_000 },
      push(2, 5),
      { kind: 'flush', force: false },
      { kind: 'sync' },
      { kind: 'crash', tear: 1, garbage: [] },
      push(1, 12),
    ]);
  });
});
