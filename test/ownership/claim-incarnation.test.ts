import {
  MAX_CHAIN_BYTES,
  appendEpoch,
  decodeChain,
  encodeChain,
  type ChainEntry,
} from '../../src/ownership/chain';
import {
  claimPartitions,
  type ClaimIo,
  type CommittedOffset,
  type RecreatedTopic,
} from '../../src/ownership/claim';
import type { PartitionCommit } from '../../src/ownership/offset-tracker';

/**
 * A topic deleted and recreated under the same name starts its offsets at 0 again.
 * The group's committed offset of the old incarnation (a commit that landed after the
 * deletion: Kafka deletes the others) would skip every new record below it, and its
 * chain's epochs staged the old incarnation's rows. The chain records the topic id it
 * was written for, and a claim drops both when the topic has another id now.
 */
function broker(initial: Map<number, CommittedOffset>, ids: Map<string, string>, logStart = 0) {
  const stored = new Map(initial);
  const recreated: RecreatedTopic[] = [];
  const io: ClaimIo = {
    committed: (tps) => Promise.resolve(tps.map(([, p]) => stored.get(p))),
    initialOffset: () => Promise.resolve(9_999), // fromBeginning: false would start at the log end
    topicIds: () => Promise.resolve(ids),
    logStart: () => Promise.resolve(logStart),
    recreated: (r) => recreated.push(r),
    commitTurn: async (claim) => {
      await claim((commits: readonly PartitionCommit[]) => {
        for (const c of commits) stored.set(c.partition, { offset: c.offset, metadata: c.metadata });
        return Promise.resolve();
      });
      return { kind: 'landed' };
    },
  };
  return { io, stored, recreated };
}

describe('chains and claims across topic incarnations', () => {
  test('a chain keeps each entry\u2019s topic id, writing it once per change (the chain keeps its length in epochs)', () => {
    const chain: ChainEntry[] = [
      { owner: 'A', epoch: 1, start: 0 },
      { owner: 'A', epoch: 2, start: 10, topicId: 'X' },
      { owner: 'B', epoch: 3, start: 20, topicId: 'X' },
      { owner: 'B', epoch: 4, start: 30, topicId: 'Y' },
    ];
    const text = encodeChain(chain);
    expect(decodeChain(text)).toEqual(chain);
    expect(text.split('"X"')).toHaveLength(2);
    // Dropping the entries that first wrote an id keeps the id on the first one left.
    let long: ChainEntry[] = [];
    for (let e = 0; e < 200; e++)
      long = appendEpoch(long, { owner: 'A'.repeat(26), epoch: e, start: e * 10, topicId: 'Z'.repeat(22) });
    expect(Buffer.byteLength(encodeChain(long))).toBeLessThanOrEqual(MAX_CHAIN_BYTES);
    expect(long.length).toBeGreaterThan(60);
    expect(decodeChain(encodeChain(long)).every((e) => e.topicId === 'Z'.repeat(22))).toBe(true);
  });

  test('a claim records the topic id it claimed for in its chain entry', async () => {
    const b = broker(
      new Map([
        [0, { offset: 100, metadata: encodeChain([{ owner: 'B', epoch: 3, start: 0, topicId: 'X' }]) }],
      ]),
      new Map([['t', 'X']]),
    );
    const [claim] = await claimPartitions([['t', 0]], 'A', 7, b.io);
    expect(claim).toMatchObject({ start: 100, topicId: 'X' });
    expect(decodeChain(b.stored.get(0)!.metadata).at(-1)).toEqual({
      owner: 'A',
      epoch: 7,
      start: 100,
      topicId: 'X',
    });
    expect(b.recreated).toEqual([]);
  });

  test('a committed offset left by a deleted incarnation is dropped with its chain; the new one is consumed from its log start', async () => {
    const old: ChainEntry[] = [{ owner: 'B', epoch: 3, start: 0, topicId: 'X' }];
    const b = broker(new Map([[0, { offset: 500, metadata: encodeChain(old) }]]), new Map([['t', 'Y']]), 0);
    const [claim] = await claimPartitions([['t', 0]], 'A', 7, b.io);
    expect(claim).toMatchObject({
      start: 0,
      topicId: 'Y',
      chain: [{ owner: 'A', epoch: 7, start: 0, topicId: 'Y' }],
    });
    expect(b.stored.get(0)!.offset).toBe(0);
    expect(b.recreated).toEqual([
      { topic: 't', partition: 0, topicId: 'Y', previousTopicId: 'X', droppedOffset: 500, start: 0 },
    ]);
  });

  test('a chain written before topic ids, or a broker without them, keeps the committed offset (no incarnation to compare)', async () => {
    const legacy = broker(
      new Map([[0, { offset: 500, metadata: encodeChain([{ owner: 'B', epoch: 3, start: 0 }]) }]]),
      new Map([['t', 'Y']]),
    );
    expect((await claimPartitions([['t', 0]], 'A', 7, legacy.io))[0]).toMatchObject({
      start: 500,
      topicId: 'Y',
    });
    const noIds = broker(
      new Map([
        [0, { offset: 500, metadata: encodeChain([{ owner: 'B', epoch: 3, start: 0, topicId: 'X' }]) }],
      ]),
      new Map(),
    );
    expect((await claimPartitions([['t', 0]], 'A', 7, noIds.io))[0]).toMatchObject({
      start: 500,
      topicId: undefined,
    });
    expect([...legacy.recreated, ...noIds.recreated]).toEqual([]);
  });
});
