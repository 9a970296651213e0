import fc from 'fast-check';
import { MAX_CHAIN_BYTES, appendEpoch, ceilingOf, decodeChain, encodeChain } from '../../src/kafka/ownership';
import { OffsetTracker } from '../../src/kafka/offset-tracker';
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

  test('the ceiling of an epoch is the next owner start; the newest epoch ends at the landed commit', () => {
    expect(ceilingOf(chain, 'A', 1, 900)).toEqual({ kind: 'found', start: 0, ceiling: 500, newest: false });
    // kept p across a join
    expect(ceilingOf(chain, 'A', 2, 900)).toEqual({ kind: 'found', start: 0, ceiling: 500, newest: false });
    expect(ceilingOf(chain, 'B', 7, 900)).toEqual({ kind: 'found', start: 500, ceiling: 800, newest: false });
    expect(ceilingOf(chain, 'A', 4, 900)).toEqual({ kind: 'found', start: 800, ceiling: 900, newest: true });
    expect(ceilingOf(chain, 'C', 1, 900)).toEqual({ kind: 'unknown' });
    expect(ceilingOf(chain, 'B', 2, 900)).toEqual({ kind: 'unknown' });
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
    t.assign('t', 0, 100 as CommitOffset, [{ owner: 'A', epoch: 1, start: 100 }]);
    expect(t.commitsDue()).toEqual([]);
    t.noteDurable('t', 0, 149 as DurableOffset);
    t.addPendingDeadLetters('t', 0, [120, 130]);
    expect(t.commitsDue().map((c) => c.offset)).toEqual([120]);
    t.resolveDeadLetters('t', 0, [120]);
    expect(t.commitsDue().map((c) => c.offset)).toEqual([130]);
    t.resolveDeadLetters('t', 0, [130]);
    const [due] = t.commitsDue();
    expect(due).toMatchObject({ topic: 't', partition: 0, offset: 150 });
    expect(decodeChain(due!.metadata)).toEqual([{ owner: 'A', epoch: 1, start: 100 }]);
    t.landed([due!]);
    expect(t.commitsDue()).toEqual([]);
    expect(t.revoke('t', 0)).toBe(150);
    t.noteDurable('t', 0, 200 as DurableOffset);
    expect(t.commitsDue()).toEqual([]);
  });
});
