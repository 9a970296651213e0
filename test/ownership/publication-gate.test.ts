import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import type { CommitOffset } from '../../src/common/offsets';
import type { PartitionCommit } from '../../src/ownership/offset-tracker';
import { PublicationGate, listPartIds } from '../../src/ownership/publication-gate';
import { tempDir } from '../support/rows';

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

  test('listPartIds: ids of open and sealed parts, nothing else; a missing directory has none', async () => {
    const dir = await tempDir('kl-gate');
    try {
      const open = '0123456789abcdef.202611301200.01M8PCDWX5BMCWVGP0GD557N97.arrows.part';
      const sealed = '0123456789abcdef.202611301200.01M8PCE1DC42YMJVF90Q8VT3BJ.arrows';
      for (const f of [open, sealed, 'plan.json', 'x.tmp']) await fsp.writeFile(path.join(dir, f), '');
      await fsp.mkdir(path.join(dir, 'plans'));
      expect((await listPartIds(dir)).sort()).toEqual([
        '01M8PCDWX5BMCWVGP0GD557N97',
        '01M8PCE1DC42YMJVF90Q8VT3BJ',
      ]);
      expect(await listPartIds(path.join(dir, 'nope'))).toEqual([]);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });

  test('listPartIds: a quarantined part holds commits unless its rows went to the dead-letter output', async () => {
    const dir = await tempDir('kl-gate');
    try {
      const q = path.join(dir, 'quarantine');
      await fsp.mkdir(q);
      const unreadable = '0123456789abcdef.202611301200.01M8PCDWX5BMCWVGP0GD557N97.arrows';
      const lettered = '0123456789abcdef.202611301200.01M8PCE1DC42YMJVF90Q8VT3BJ.arrows';
      const noLetters = '0123456789abcdef.202611301200.01M8PCE1DC42YMJVF90Q8VT3BK.arrows';
      for (const f of [unreadable, lettered, noLetters]) await fsp.writeFile(path.join(q, f), '');
      await fsp.writeFile(
        path.join(q, `${lettered}.reason.json`),
        JSON.stringify({ deadLetterFile: '/x.jsonl' }),
      );
      await fsp.writeFile(
        path.join(q, `${noLetters}.reason.json`),
        JSON.stringify({ reason: 'part-corrupt' }),
      );
      expect((await listPartIds(dir)).sort()).toEqual([
        '01M8PCDWX5BMCWVGP0GD557N97',
        '01M8PCE1DC42YMJVF90Q8VT3BK',
      ]);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });
});
