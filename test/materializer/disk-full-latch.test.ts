import { DiskFullLatch } from '../../src/materializer/disk-full-latch';
import type { MaterializerStats } from '../../src/materializer/materializer-stats';

const full = { stage: 'lance' as const, path: '/lance/a', operation: 'write' };

function stats(o: { diskFullNow?: boolean; diskFull?: boolean; publications?: number }): MaterializerStats {
  return {
    ...(o.diskFull || o.diskFullNow ? { diskFull: full } : {}),
    counted: {
      publications: o.publications ?? 0,
      failures: o.diskFullNow ? { 'disk-full': 1 } : {},
    },
  } as unknown as MaterializerStats;
}

describe('disk-full pause over many tables', () => {
  test("any table's publication clears it, though a table that met the full disk has not published since", () => {
    const latch = new DiskFullLatch();
    expect(latch.take(stats({ diskFullNow: true }))).toEqual(full); // table a meets it
    expect(latch.take(stats({ publications: 1 }))).toBeUndefined(); // table b publishes
    // a's next report still carries its old state (it has not published): no pause again.
    expect(latch.take(stats({ diskFull: true }))).toBeUndefined();
    // a meets it again: paused again.
    expect(latch.take(stats({ diskFullNow: true }))).toEqual(full);
    expect(latch.full).toEqual(full);
  });
});
