import fc from 'fast-check';
import { recordOffset } from '../../src/common/offsets';
import {
  countKeptRows,
  keptBounds,
  keptRowsOfRanges,
  keptRuns,
  keptSpan,
} from '../../src/materializer/keep-range';
import type { KeepRange } from '../../src/materializer/ledger';
import { offsetRangesOf } from '../../src/staging/sealed-part';
import { rowsFor } from '../support/rows';

const T = 't';

describe('keep ranges: one definition of [from, below) for planning, counting and filtering', () => {
  const keep: KeepRange[] = [{ topic: T, partition: 0, from: 10, below: 20 }];

  test('from is kept, below is not; a partition without a keep range keeps nothing', () => {
    expect(keptSpan(keep, T, 0, 10, 19)).toBe('all');
    expect(keptSpan(keep, T, 0, 9, 9)).toBe('none');
    expect(keptSpan(keep, T, 0, 20, 25)).toBe('none');
    expect(keptSpan(keep, T, 0, 15, 20)).toBe('some');
    expect(keptSpan(keep, T, 0, 5, 10)).toBe('some');
    expect(keptSpan(keep, T, 1, 10, 19)).toBe('none');
    expect(keptSpan(keep, 'other', 0, 10, 19)).toBe('none');
    expect(keptBounds(keep, T, 0, 5, 25)).toEqual({ first: 10, last: 19 });
    expect(keptBounds(keep, T, 0, 20, 25)).toBeUndefined();
  });

  test('runs of kept rows are slices of consecutive kept rows', () => {
    const batch = rowsFor(T, 0, [8, 9, 10, 11, 19, 20, 21]);
    expect(keptRuns(batch, keep)).toEqual([[2, 5]]);
    expect(countKeptRows([batch], keep)).toBe(3);
  });

  test('the count from part ranges (no read) agrees with the row filter whenever no range straddles', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uniqueArray(fc.integer({ min: 0, max: 60 }), { maxLength: 30 }), {
          minLength: 1,
          maxLength: 3,
        }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 70 }), fc.integer({ min: 0, max: 70 })), {
          minLength: 3,
          maxLength: 3,
        }),
        (offsetsByPartition, bounds) => {
          const batches = offsetsByPartition
            .map((offsets, p) => ({ offsets: [...offsets].sort((a, b) => a - b), p }))
            .filter(({ offsets }) => offsets.length > 0)
            .map(({ offsets, p }) => rowsFor(T, p, offsets));
          const ranges = offsetRangesOf('x', batches);
          const ks: KeepRange[] = bounds.map(([a, b], p) => ({
            topic: T,
            partition: p,
            from: Math.min(a, b),
            below: Math.max(a, b),
          }));
          const naive = offsetsByPartition.reduce(
            (n, offsets, p) => n + offsets.filter((o) => o >= ks[p]!.from && o < ks[p]!.below).length,
            0,
          );
          expect(countKeptRows(batches, ks)).toBe(naive);
          const straddles = ranges.some(
            (r) => keptSpan(ks, r.topic, r.partition, r.firstOffset, r.lastOffset) === 'some',
          );
          if (!straddles) expect(keptRowsOfRanges(ranges, ks)).toBe(naive);
        },
      ),
    );
  });

  test('a straddling range counts nothing without a read (the caller reads the part)', () => {
    const ranges = [
      { topic: T, partition: 0, firstOffset: recordOffset(5), lastOffset: recordOffset(15), rows: 11 },
    ];
    expect(keptRowsOfRanges(ranges, keep)).toBe(0);
  });
});
