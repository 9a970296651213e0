import { tpKey, type DurableOffset } from '../../src/common/offsets';
import { HighWaters } from '../../src/staging/high-waters';

const at = (n: number) => n as DurableOffset;

describe('staging high-waters', () => {
  test('a revoke during a sync lowers the threshold, and the sync never raises durability past it', () => {
    const marks = new HighWaters();
    marks.pushed('t', 0, at(100));
    const snapshot = marks.pushedSnapshot();
    marks.lower('t', 0, at(40)); // the partition was lost while the writers fsynced
    marks.durable(snapshot);
    expect(marks.durableOffsets().get(tpKey('t', 0))).toBe(40);
    expect(marks.pushedThrough('t', 0)).toBe(40);
  });

  test('the thresholds start at the given offsets, or at nothing durable, and an assignment raises both', () => {
    const marks = new HighWaters(new Map([[tpKey('t', 0), at(9)]]));
    expect(marks.pushedThrough('t', 0)).toBe(9);
    expect(marks.pushedThrough('t', 1)).toBe(-1);
    marks.raise('t', 1, at(50));
    expect(marks.pushedThrough('t', 1)).toBe(50);
    expect(marks.durableOffsets().get(tpKey('t', 1))).toBe(50);
    marks.raise('t', 0, at(5)); // never lowers
    expect(marks.pushedThrough('t', 0)).toBe(9);
  });
});
