import { tpKey, type RecordOffset } from '../../src/common/offsets';
import { planPublications, type PartitionOwnership } from '../../src/materializer/planner';
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
  test('issue 9 item 4: a snapshot read before a re-claim never cuts the new epoch\u2019s committed rows', () => {
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

  test('a part whose epoch the chain no longer reaches is held once, not also counted as waiting', () => {
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
