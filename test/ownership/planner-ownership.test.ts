import { tpKey, type RecordOffset } from '../../src/common/offsets';
import fc from 'fast-check';
import { planPublications } from '../../src/materializer/planner';
import type { PartitionOwnership } from '../../src/ownership/partition-ownership';
import { appendEpoch, mayHaveDroppedEntries, type ChainEntry } from '../../src/ownership/chain';
import type { SealedPart } from '../../src/staging/sealed-part';
import type { MinuteKey } from '../../src/staging/part-name';

const part = (owner: string, epoch: number, first: number, last: number): SealedPart => ({
  path: `/x/0123456789abcdef.202611301200.01JDZZZZZZZZZZZZZZZZZZZZZ${epoch}.arrows`,
  schemaKey: '0123456789abcdef',
  minute: '202611301200' as MinuteKey,
  epoch: { owner, epoch },
  bytes: 100,
  rows: last - first + 1,
  batches: 1,
  checksum: 'x',
  ranges: [
    {
      topic: 't',
      partition: 0,
      firstOffset: first as RecordOffset,
      lastOffset: last as RecordOffset,
      rows: last - first + 1,
    },
  ],
});

const plan = (parts: SealedPart[], ownership: PartitionOwnership, liveOwner = 'A') =>
  planPublications({
    parts,
    ownership: new Map([[tpKey('t', 0), ownership]]),
    liveOwner,
    planned: new Set(),
    maxPublicationBytes: 1 << 20,
    maxPublicationDelayMs: 0,
    now: Date.now() + 60_000,
  });

describe('planner and ownership snapshots', () => {
  test('a snapshot read before a re-claim never cuts the new epoch\u2019s committed rows', () => {
    // A owned p in epoch 1 from 0, missed a generation while B consumed 50..59, and claimed
    // it again in epoch 5 at 60; it staged and committed 60..80. The snapshot was read before
    // A's re-claim landed: it ends with B's entry.
    const stale: PartitionOwnership = {
      chain: [
        { owner: 'A', epoch: 1, start: 0 },
        { owner: 'B', epoch: 3, start: 50 },
      ],
      committed: 60,
    };
    const out = plan([part('A', 5, 60, 80)], stale);
    // Before: epoch 5 took epoch 1's range [0, 50) and the part was published with 0 rows.
    expect(out.groups).toEqual([]);
    expect(out.waiting).toBe(1);
    expect(out.unresolvable).toEqual([]);

    const fresh: PartitionOwnership = {
      chain: [...stale.chain, { owner: 'A', epoch: 5, start: 60 }],
      committed: 81,
    };
    const ready = plan([part('A', 5, 60, 80)], fresh);
    expect(ready.groups.flat().map((d) => d.keep)).toEqual([
      [{ topic: 't', partition: 0, from: 60, below: 81 }],
    ]);
  });

  test('a part whose epoch a replaced (not full) chain lacks is held once, not also counted as waiting', () => {
    const out = plan([part('Z', 2, 0, 9)], { chain: [{ owner: 'A', epoch: 1, start: 10 }], committed: 20 });
    expect(out.unresolvable).toHaveLength(1);
    expect(out.waiting).toBe(0);
  });
});

describe("planner in 'published' commit mode", () => {
  const planIn = (parts: SealedPart[], ownership: PartitionOwnership, commitAfter: 'staged' | 'published') =>
    planPublications({
      parts,
      ownership: new Map([[tpKey('t', 0), ownership]]),
      liveOwner: 'A',
      commitAfter,
      planned: new Set(),
      maxPublicationBytes: 1 << 20,
      maxPublicationDelayMs: 0,
      now: Date.now() + 60_000,
    });

  test('a running epoch of this process is planned before its rows are committed, with no ceiling', () => {
    // A claimed p at 100 in epoch 2 and staged 100..180; nothing is committed yet.
    const running: PartitionOwnership = { chain: [{ owner: 'A', epoch: 2, start: 100 }], committed: 100 };
    // Staged mode waits for the commit (which, in published mode, would wait for this publication).
    expect(planIn([part('A', 2, 100, 180)], running, 'staged').groups).toEqual([]);
    const out = planIn([part('A', 2, 100, 180)], running, 'published');
    expect(out.groups.flat().map((d) => d.keep)).toEqual([
      [{ topic: 't', partition: 0, from: 100, below: Number.MAX_SAFE_INTEGER }],
    ]);
  });

  test('an ended epoch keeps its ceiling: the next owner starts there', () => {
    const ended: PartitionOwnership = {
      chain: [
        { owner: 'A', epoch: 2, start: 100 },
        { owner: 'B', epoch: 1, start: 150 },
      ],
      committed: 150,
    };
    expect(
      planIn([part('A', 2, 100, 180)], ended, 'published')
        .groups.flat()
        .map((d) => d.keep),
    ).toEqual([[{ topic: 't', partition: 0, from: 100, below: 150 }]]);
  });
});

/** Owners as long as real ones (ULIDs), so that the chain fills as it does in production. */
const owner = (n: number) => `01JE${String(n).padStart(22, '0')}`;

/** Claims appended as replicas append them (starts nondecreasing), until the bound drops old ones. */
function chainOf(claims: readonly ChainEntry[]): ChainEntry[] {
  return claims.reduce<ChainEntry[]>((chain, c) => appendEpoch(chain, c), []);
}

describe('epochs a full chain dropped (scale-down, returning replicas)', () => {
  // Z (a replica since scaled away) owned p from 0 in epoch 2 and staged 0..149; its last
  // landed commit was 120, so the next owner claimed at 120. Then 200 more claims.
  const z = { owner: owner(999), epoch: 2, start: 0 };
  const later = Array.from({ length: 200 }, (_, i) => ({
    owner: owner(i % 3),
    epoch: 10 + i,
    start: 120 + i,
  }));
  const chain = chainOf([z, ...later]);

  test('a dropped epoch is planned, not held: rows below the oldest retained start, insert-if-absent; rows above cut', () => {
    expect(mayHaveDroppedEntries(chain)).toBe(true);
    expect(chain.some((e) => e.owner === z.owner)).toBe(false);
    const oldest = chain[0]!.start;
    const out = plan([part(z.owner, z.epoch, 0, oldest + 30)], { chain, committed: 400 }, owner(0));
    expect(out.unresolvable).toEqual([]);
    const decisions = out.groups.flat();
    expect(decisions).toHaveLength(1);
    expect(decisions[0]!.keep).toEqual([{ topic: 't', partition: 0, from: 0, below: oldest }]);
    expect(decisions[0]!.straddles).toBe(true);
    expect(decisions[0]!.write).toBe('insert-if-absent');
  });

  test('a part of a dropped epoch is never published in the same plan as an ordinary append', () => {
    const newest = chain.at(-1)!;
    const ordinary = part(newest.owner, newest.epoch, newest.start, newest.start + 5);
    const out = plan(
      [part(z.owner, z.epoch, 0, 100), ordinary],
      { chain, committed: newest.start + 10 },
      newest.owner,
    );
    expect(out.groups.map((g) => g.map((d) => d.write)).sort()).toEqual([['append'], ['insert-if-absent']]);
  });

  test("this process's epoch newer than the snapshot is never taken for a dropped one (that would cut all its rows)", () => {
    const live = owner(0);
    const out = plan([part(live, 9_999, 500, 520)], { chain, committed: 520 }, live);
    expect(out.groups).toEqual([]);
    expect(out.waiting).toBe(1);
  });

  test('an epoch in the older half of a full chain is published insert-if-absent, the newer half appends', () => {
    const old = chain[1]!;
    const young = chain.at(-2)!;
    const outOld = plan(
      [part(old.owner, old.epoch, old.start, old.start)],
      { chain, committed: 999 },
      owner(7),
    );
    const outYoung = plan(
      [part(young.owner, young.epoch, young.start, young.start)],
      { chain, committed: 999 },
      owner(7),
    );
    expect(outOld.groups.flat().map((d) => d.write)).toEqual(['insert-if-absent']);
    expect(outYoung.groups.flat().map((d) => d.write)).toEqual(['append']);
  });

  test('no number of claims makes a committed row of an ended epoch unpublishable, nor keeps a row another epoch owns in an append', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 300 }),
        fc.array(fc.integer({ min: 0, max: 50 }), { minLength: 1, maxLength: 300 }),
        (claims, gaps) => {
          // Epoch 1 of X starts at 0; each later claim starts at or after the previous one.
          const entries: ChainEntry[] = [{ owner: 'X'.repeat(26), epoch: 1, start: 0 }];
          for (let i = 0; i < claims; i++)
            entries.push({
              owner: owner(i % 5),
              epoch: 2 + i,
              start: entries.at(-1)!.start + gaps[i % gaps.length]!,
            });
          const ceiling = entries[1]!.start; // X's official rows: [0, ceiling)
          const c = chainOf(entries);
          const staged = ceiling + 20; // X staged 20 rows past its last commit before it went
          const out = plan(
            [part('X'.repeat(26), 1, 0, staged)],
            { chain: c, committed: entries.at(-1)!.start },
            owner(0),
          );
          const d = out.groups.flat();
          if (d.length !== 1) return false; // never held, never waiting: an ended epoch
          const k = d[0]!.keep[0]!;
          // Every official row is kept; a kept row beyond the official range only insert-if-absent.
          return (
            k.from <= 0 && k.below >= ceiling && (k.below === ceiling || d[0]!.write === 'insert-if-absent')
          );
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('planner across topic incarnations', () => {
  test("a deleted incarnation's part is held against the recreated topic's chain, full or not: its starts never cut it", () => {
    const old = part('Z', 2, 1000, 1999);
    const oldPart: SealedPart = { ...old, ranges: old.ranges.map((r) => ({ ...r, topicId: 'X' })) };
    // The recreated topic's chain (id Y), filled by many claims: it dropped entries.
    let chain: ChainEntry[] = [];
    for (let e = 1; !mayHaveDroppedEntries(chain); e++)
      chain = appendEpoch(chain, { owner: e % 2 ? 'A' : 'B', epoch: e, start: 30 + e, topicId: 'Y' });
    const out = plan([oldPart], { chain, committed: 500 });
    expect(out.groups).toEqual([]);
    expect(out.unresolvable).toEqual([
      { part: oldPart.path, topic: 't', partition: 0, owner: 'Z', epoch: 2, topicId: 'X' },
    ]);
  });
});
