import { keepFromCutoff, safeCleanupCutoff } from '../../src/lance/table-cleanup';

const v = (version: number, ms: number) => ({ version, timestamp: new Date(ms) });

describe('safeCleanupCutoff: a version is removable only once it stopped being the latest before retainSince', () => {
  test('the version that was the latest at retainSince is kept, older ones are removable', () => {
    // v3 was the latest from 3000 to 9000: retaining since 5000 keeps it (LanceDB removes ts < cutoff).
    expect(safeCleanupCutoff([v(1, 1000), v(2, 2000), v(3, 3000), v(4, 9000)], 5000)).toBe(3000);
  });

  test('after a quiet period the old latest version is kept (its successor is recent)', () => {
    // LanceDB's own rule (created before 5000) would remove v2, the base of commits still in flight.
    expect(safeCleanupCutoff([v(1, 1000), v(2, 2000), v(3, 9990)], 5000)).toBe(2000);
  });

  test('nothing older than retainSince: nothing removable', () => {
    expect(safeCleanupCutoff([v(1, 6000), v(2, 7000)], 5000)).toBe(0);
    expect(safeCleanupCutoff([], 5000)).toBe(0);
  });

  test('a later version with an earlier timestamp (another clock) lowers the cutoff', () => {
    expect(safeCleanupCutoff([v(1, 1000), v(2, 4000), v(3, 3500), v(4, 9000)], 5000)).toBe(3500);
    // Order of the input does not matter.
    expect(safeCleanupCutoff([v(4, 9000), v(2, 4000), v(1, 1000), v(3, 3500)], 5000)).toBe(3500);
  });

  test('sub-millisecond timestamps are floored (the kept version stays at or after the cutoff)', () => {
    expect(
      safeCleanupCutoff([v(1, 1000), { version: 2, timestamp: new Date(2000.7) }, v(3, 9000)], 5000),
    ).toBe(2000);
  });

  test('every version from the cleanup fence on is kept, whatever clock stamped it', () => {
    // v3 is the fence (a compactor whose clock runs ahead stamped v4 earlier than v3).
    const versions = [v(1, 1000), v(2, 2000), v(3, 9000), v(4, 1500), v(5, 9500)];
    expect(safeCleanupCutoff(versions, 9800, 3)).toBe(1500);
    expect(keepFromCutoff(versions, 9800, 3)).toBe(1500);
    // Without a version at or after the fence stamped earlier, the fence changes nothing.
    expect(safeCleanupCutoff([v(1, 1000), v(2, 2000), v(3, 9000)], 5000, 3)).toBe(2000);
  });
});
