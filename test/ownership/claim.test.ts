import { decodeChain, encodeChain, type ChainEntry } from '../../src/ownership/chain';
import { claimPartitions, type ClaimIo, type CommittedOffset } from '../../src/ownership/claim';
import type { PartitionCommit } from '../../src/ownership/offset-tracker';
import { publishableRange } from '../../src/ownership/publishable-range';

/** A broker that stores commits; `lose` drops the answer of the next commit after storing it. */
function broker(initial: Map<number, CommittedOffset>) {
  const stored = new Map(initial);
  let loseNextAnswer = false;
  const io: ClaimIo = {
    committed: (tps) => Promise.resolve(tps.map(([, p]) => stored.get(p))),
    initialOffset: () => Promise.resolve(0),
    commitTurn: async (claim) => {
      let answered = false;
      await claim((commits: readonly PartitionCommit[]) => {
        for (const c of commits) stored.set(c.partition, { offset: c.offset, metadata: c.metadata });
        answered = !loseNextAnswer;
        loseNextAnswer = false;
        return Promise.resolve();
      });
      return answered ? { kind: 'landed' } : { kind: 'refused', error: new Error('request timed out') };
    },
  };
  return {
    io,
    stored,
    loseNextAnswer: () => (loseNextAnswer = true),
  };
}

describe('claim protocol', () => {
  test('a claim appends this epoch at the committed offset and commits it', async () => {
    const prior: ChainEntry[] = [{ owner: 'B', epoch: 3, start: 0 }];
    const b = broker(new Map([[0, { offset: 100, metadata: encodeChain(prior) }]]));
    const [claim] = await claimPartitions([['t', 0]], 'A', 7, b.io);
    expect(claim).toMatchObject({ start: 100, chain: [...prior, { owner: 'A', epoch: 7, start: 100 }] });
    expect(decodeChain(b.stored.get(0)!.metadata)).toEqual(claim!.chain);
  });

  test('a retry after a claim that landed without an answer keeps its entry once (no empty range)', async () => {
    const prior: ChainEntry[] = [{ owner: 'B', epoch: 3, start: 0 }];
    const b = broker(new Map([[0, { offset: 100, metadata: encodeChain(prior) }]]));
    b.loseNextAnswer();
    await expect(claimPartitions([['t', 0]], 'A', 7, b.io)).rejects.toThrow('did not land');
    const [claim] = await claimPartitions([['t', 0]], 'A', 7, b.io);
    const chain = decodeChain(b.stored.get(0)!.metadata);
    expect(chain).toEqual([...prior, { owner: 'A', epoch: 7, start: 100 }]);
    expect(claim!.start).toBe(100);
    // Before: A/e7@100 twice, and epoch 7's range was [100, 100): every row cut.
    expect(publishableRange(chain, 'A', 7, 250)).toEqual({
      kind: 'found',
      start: 100,
      ceiling: 250,
      newest: true,
    });
  });

  test('a chain that already repeats an entry is read by its last copy', () => {
    const chain: ChainEntry[] = [
      { owner: 'A', epoch: 7, start: 100 },
      { owner: 'A', epoch: 7, start: 100 },
    ];
    expect(publishableRange(chain, 'A', 7, 250)).toEqual({
      kind: 'found',
      start: 100,
      ceiling: 250,
      newest: true,
    });
  });
});
