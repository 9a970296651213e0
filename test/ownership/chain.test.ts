import fc from 'fast-check';
import { MAX_CHAIN_BYTES, appendEpoch, decodeChain, encodeChain } from '../../src/ownership/chain';
import { publishableRange } from '../../src/ownership/publishable-range';
import { OffsetTracker } from '../../src/ownership/offset-tracker';
import type { CommitOffset, DurableOffset } from '../../src/common/offsets';

describe('ownership chain', () => {
  const chain = [
    { owner: 'A', epoch: 1, start: 0 },
    { owner: 'B', epoch: 3, start: 500 },
    { owner: 'A', epoch: 4, start: 800 },
  ];

  test('round-trips through offset metadata; foreign metadata is an empty chain', () => {
    expect(decodeChain(encodeChain(chain))).toEqual(chain);
    expect(decodeChain('')).toEqual([]);
    expect(decodeChain(null)).toEqual([]);
    expect(decodeChain('{"something":"else"}')).toEqual([]);
    expect(decodeChain('not json')).toEqual([]);
  });

  test('the ceiling of an epoch is the next entry start; the newest epoch ends at the landed commit', () => {
    expect(publishableRange(chain, 'A', 1, 900)).toEqual({
      kind: 'found',
      start: 0,
      ceiling: 500,
      newest: false,
    });
    expect(publishableRange(chain, 'B', 3, 900)).toEqual({
      kind: 'found',
      start: 500,
      ceiling: 800,
      newest: false,
    });
    expect(publishableRange(chain, 'A', 4, 900)).toEqual({
      kind: 'found',
      start: 800,
      ceiling: 900,
      newest: true,
    });
    expect(publishableRange(chain, 'C', 1, 900)).toEqual({ kind: 'unknown' });
  });

  test('an epoch matches only its own entry (every join claims anew): no older entry of the owner stands in', () => {
    // Before: epoch 2 of A (a join that kept p) took epoch 1's range; B's epoch 7 took epoch 3's.
    expect(publishableRange(chain, 'A', 2, 900)).toEqual({ kind: 'unknown' });
    expect(publishableRange(chain, 'B', 7, 900)).toEqual({ kind: 'unknown' });
  });

  test('appending keeps the encoded chain inside the broker metadata limit, dropping the oldest', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.string({ minLength: 26, maxLength: 26 }), fc.nat()), { maxLength: 300 }),
        (entries) => {
          let c: ReturnType<typeof appendEpoch> = [];
          entries.forEach(([owner, start], i) => (c = appendEpoch(c, { owner, epoch: i, start })));
          expect(Buffer.byteLength(encodeChain(c))).toBeLessThanOrEqual(MAX_CHAIN_BYTES);
          if (entries.length > 0) expect(c.at(-1)!.epoch).toBe(entries.length - 1);
        },
      ),
    );
  });
});

describe('offset tracker', () => {
  test('commits the highest durable offset + 1, held back below a pending dead letter, only for owned partitions', () => {
    const t = new OffsetTracker();
    t.assign('t', 0, 100 as CommitOffset, [{ owner: 'A', epoch: 1, start: 100 }], 1);
    expect(t.commitsDue()).toEqual([]);
    t.noteDurable('t', 0, 149 as DurableOffset, 1);
    t.holdOffsets('t', 0, [120, 130]);
    expect(t.commitsDue().map((c) => c.offset)).toEqual([120]);
    t.releaseOffsets('t', 0, [120]);
    expect(t.commitsDue().map((c) => c.offset)).toEqual([130]);
    t.releaseOffsets('t', 0, [130]);
    const [due] = t.commitsDue();
    expect(due).toMatchObject({ topic: 't', partition: 0, offset: 150 });
    expect(decodeChain(due!.metadata)).toEqual([{ owner: 'A', epoch: 1, start: 100 }]);
    t.landed([due!]);
    expect(t.commitsDue()).toEqual([]);
    expect(t.revoke('t', 0)).toBe(150);
    t.noteDurable('t', 0, 200 as DurableOffset, 1);
    expect(t.commitsDue()).toEqual([]);
  });
});

describe('offset tracker across a re-claim', () => {
  test('a durable report from the epoch before the re-claim never moves the new claim (its rows are cut)', () => {
    const t = new OffsetTracker();
    t.assign('t', 0, 100 as CommitOffset, [{ owner: 'A', epoch: 1, start: 100 }], 1);
    // Missed a generation: another member owned p from 100 to 150, then A claims again at 150.
    const chain = [
      { owner: 'A', epoch: 1, start: 100 },
      { owner: 'B', epoch: 1, start: 100 },
      { owner: 'A', epoch: 2, start: 150 },
    ];
    t.revoke('t', 0);
    t.assign('t', 0, 150 as CommitOffset, chain, 2);
    // A sync answered after the re-claim but taken in epoch 1: rows 150..199 are epoch 1's, cut at 100.
    t.noteDurable('t', 0, 199 as DurableOffset, 1);
    expect(t.commitsDue()).toEqual([]);
    t.noteDurable('t', 0, 160 as DurableOffset, 2);
    const [due] = t.commitsDue();
    expect(due).toMatchObject({ offset: 161 });
    expect(decodeChain(due!.metadata)).toEqual(chain);
  });
});
