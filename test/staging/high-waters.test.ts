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

  test('the thresholds start at nothing durable, and an assignment raises both, never lowering them', () => {
    const marks = new HighWaters();
    marks.raise('t', 0, at(9));
    expect(marks.pushedThrough('t', 0)).toBe(9);
    expect(marks.pushedThrough('t', 1)).toBe(-1);
    marks.raise('t', 1, at(50));
    expect(marks.pushedThrough('t', 1)).toBe(50);
    expect(marks.durableOffsets().get(tpKey('t', 1))).toBe(50);
    marks.raise('t', 0, at(5)); // never lowers
    expect(marks.pushedThrough('t', 0)).toBe(9);
  });

  test('a push after a snapshot is in the next snapshot, and a copy handed out never changes after', () => {
    const marks = new HighWaters();
    marks.pushed('t', 0, at(10));
    const first = marks.pushedSnapshot();
    marks.durable(first);
    const durableThen = marks.durableOffsets();
    marks.pushed('t', 0, at(20));
    const second = marks.pushedSnapshot();
    expect(second.get(tpKey('t', 0))).toBe(20);
    expect(first.get(tpKey('t', 0))).toBe(10);
    marks.durable(second);
    expect(marks.durableOffsets().get(tpKey('t', 0))).toBe(20);
    expect(durableThen.get(tpKey('t', 0))).toBe(10);
  });

  test('a snapshot made durable again after a revoke still never raises durability past the revoke', () => {
    const marks = new HighWaters();
    marks.pushed('t', 0, at(100));
    const snapshot = marks.pushedSnapshot();
    marks.durable(snapshot);
    marks.lower('t', 0, at(40));
    marks.durable(marks.pushedSnapshot());
    marks.durable(snapshot); // a sync that began before the revoke ends after it
    expect(marks.durableOffsets().get(tpKey('t', 0))).toBe(40);
    marks.raise('t', 0, at(60)); // claimed again from the broker's committed offset
    expect(marks.durableOffsets().get(tpKey('t', 0))).toBe(60);
    expect(marks.pushedSnapshot().get(tpKey('t', 0))).toBe(60);
  });
});
