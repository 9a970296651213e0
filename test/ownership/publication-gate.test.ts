import type { CommitOffset } from '../../src/common/offsets';
import type { PartitionCommit } from '../../src/ownership/offset-tracker';
import { PublicationGate } from '../../src/ownership/publication-gate';

const commit = (partition: number, offset: number): PartitionCommit => ({
  topic: 't',
  partition,
  offset: offset as CommitOffset,
  metadata: '{}',
});
const ids = (...xs: string[]) => new Set(xs);

describe('publication gate (commit after published)', () => {
  test('a commit waits until every part present at its tick is gone; parts of older epochs never hold it', () => {
    const gate = new PublicationGate();
    gate.open(['old1']);
    // Tick 1: parts a, b hold the rows below 100.
    expect(gate.tick([commit(0, 100)], ids('old1', 'a', 'b'))).toEqual([]);
    // Tick 2: a published; c opened (rows up to 150 are in a, b, c).
    expect(gate.tick([commit(0, 150)], ids('old1', 'b', 'c'))).toEqual([]);
    // Tick 3: b published: tick 1's commit is released, not tick 2's (c is still there).
    expect(gate.tick([commit(0, 170)], ids('old1', 'c', 'd'))).toEqual([commit(0, 100)]);
    // c and d gone, old1 still there (an older epoch's part): everything released, newest per partition.
    expect(gate.tick([], ids('old1'))).toEqual([commit(0, 170)]);
    expect(gate.waiting).toBe(0);
  });

  test('commits of several partitions are released together, the newest of each', () => {
    const gate = new PublicationGate();
    gate.open([]);
    gate.tick([commit(0, 10), commit(1, 5)], ids('a'));
    gate.tick([commit(0, 20)], ids('a', 'b'));
    expect(gate.tick([], ids()).sort((x, y) => x.partition - y.partition)).toEqual([
      commit(0, 20),
      commit(1, 5),
    ]);
  });

  test('nothing is released between a join and the start of its epoch; the join forgets held commits', () => {
    const gate = new PublicationGate();
    gate.open([]);
    gate.tick([commit(0, 10)], ids('a'));
    gate.close();
    expect(gate.isOpen).toBe(false);
    expect(gate.tick([commit(0, 20)], ids())).toEqual([]);
    gate.open(['a']);
    expect(gate.waiting).toBe(0);
    expect(gate.tick([commit(0, 30)], ids('a'))).toEqual([commit(0, 30)]);
  });
});
