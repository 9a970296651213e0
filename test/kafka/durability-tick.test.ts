import { DiskFullError } from '../../src/common/errors';
import type { CommitOffset } from '../../src/common/offsets';
import { DurabilityTick } from '../../src/kafka/durability-tick';
import { OffsetTracker, type PartitionCommit } from '../../src/ownership/offset-tracker';
import type { DurableReport } from '../../src/pool/protocol';

/**
 * One durability tick with the real offset tracker and fakes of the staging pool, the
 * disk pressure and the committer: what staging reports durable becomes the commit.
 */
function harness(sync: () => Promise<DurableReport[]>) {
  const tracker = new OffsetTracker();
  const calls = {
    commits: [] as PartitionCommit[][],
    flushes: 0,
    full: [] as string[],
    written: [] as string[],
    syncs: 0,
  };
  const tick = new DurabilityTick(
    {
      intervalMs: 1_000,
      pool: {
        sync: () => sync(),
        flush: () => {
          calls.flushes += 1;
          return Promise.resolve({ parts: 0, rows: 0, bytes: 0 } as never);
        },
      },
      tracker,
      gate: undefined,
      tableDir: '/nonexistent',
      diskPressure: {
        reportFull: (stage, report) => void calls.full.push(`${stage}:${report.operation}`),
        reportWritten: (stage) => void calls.written.push(stage),
      },
      events: {
        syncStarted: () => {
          calls.syncs += 1;
          return () => undefined;
        },
      },
      stopping: () => false,
      fail: (error) => {
        throw error;
      },
    },
    { commit: (commits) => Promise.resolve(void calls.commits.push([...commits])) },
  );
  return { tick, tracker, calls };
}

test('offsets staging reports durable in the claim’s epoch are committed (highest durable + 1), then due parts are sealed', async () => {
  const { tick, tracker, calls } = harness(() =>
    Promise.resolve([{ epoch: 1, offsets: [['t', 0, 19]], unsealed: [] }]),
  );
  tracker.assign('t', 0, 10 as CommitOffset, [], 1);
  await tick.tick();
  expect(calls.commits.map((c) => c.map((x) => [x.topic, x.partition, x.offset]))).toEqual([[['t', 0, 20]]]);
  expect(calls.flushes).toBe(1);
  expect(calls.written).toEqual(['staging']);
  expect(calls.syncs).toBe(1);
});

test('a report from an epoch older than the partition’s claim commits nothing', async () => {
  const { tick, tracker, calls } = harness(() =>
    Promise.resolve([{ epoch: 1, offsets: [['t', 0, 19]], unsealed: [] }]),
  );
  tracker.assign('t', 0, 10 as CommitOffset, [], 2);
  await tick.tick();
  expect(calls.commits).toEqual([[]]);
});

test('a full staging disk at the sync commits nothing and reports the disk full, without failing the replica', async () => {
  const { tick, tracker, calls } = harness(() =>
    Promise.reject(new DiskFullError('staging', '/data/staging/t/p.arrows.part', 'write')),
  );
  tracker.assign('t', 0, 10 as CommitOffset, [], 1);
  await tick.tick();
  expect(calls.commits).toEqual([]);
  expect(calls.flushes).toBe(0);
  expect(calls.full).toEqual(['staging:write']);
  expect(calls.written).toEqual([]);
});
