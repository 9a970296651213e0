import fc from 'fast-check';
import { offsetsOf } from '../../src/staging/push-runs';
import { range, rowsFor } from '../support/rows';

/**
 * A pushed batch's offsets, read from the column's buffers rather than row by row as
 * BigInts. The hazard: an offset read wrongly (a high half lost past 2^32, a sliced batch
 * read from its buffer's start), which would put rows in the wrong part or trip the
 * offset-order check.
 */
test('offsets read from the buffers are the column’s values, past 2^32 and in sliced batches', () => {
  fc.assert(
    fc.property(
      fc.oneof(fc.nat(1000), fc.integer({ min: 2 ** 32 - 5, max: 2 ** 32 + 5 }), fc.constant(2 ** 53 - 40)),
      fc.nat(30),
      fc.nat(30),
      fc.nat(30),
      (first, count, sliceFrom, sliceLength) => {
        const batch = rowsFor('t', 0, range(first, first + count));
        const expected = (b: typeof batch) =>
          Array.from({ length: b.numRows }, (_, i) => Number(b.getChild('_offset')!.get(i) as bigint));
        expect([...offsetsOf(batch)]).toEqual(expected(batch));
        const sliced = batch.slice(Math.min(sliceFrom, count), Math.min(count, sliceFrom + sliceLength));
        expect([...offsetsOf(sliced)]).toEqual(expected(sliced));
        expect([...offsetsOf(sliced)]).toEqual(
          range(first, first + count).slice(
            Math.min(sliceFrom, count),
            Math.min(count, sliceFrom + sliceLength),
          ),
        );
      },
    ),
    { numRuns: 300 },
  );
});
