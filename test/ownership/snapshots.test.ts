import { SequencedSnapshots } from '../../src/ownership/snapshots';

describe('sequenced ownership snapshots', () => {
  test('an answer that arrives late never replaces a newer snapshot', async () => {
    const answers: ((v: string) => void)[] = [];
    const applied: [string, number][] = [];
    const s = new SequencedSnapshots(
      () => new Promise<string>((r) => answers.push(r)),
      (v, seq) => applied.push([v, seq]),
    );
    const first = s.refresh();
    // A second refresh while the first runs joins it instead of racing it.
    expect(s.refresh()).toBe(first);
    answers[0]!('old');
    await first;
    const second = s.refresh();
    answers[1]!('new');
    await second;
    expect(applied).toEqual([
      ['old', 1],
      ['new', 2],
    ]);
  });

  test('a failed read applies nothing and the next one proceeds', async () => {
    let n = 0;
    const applied: number[] = [];
    const s = new SequencedSnapshots(
      () => (++n === 1 ? Promise.reject(new Error('broker down')) : Promise.resolve(n)),
      (v) => applied.push(v),
    );
    await expect(s.refresh()).rejects.toThrow('broker down');
    await s.refresh();
    expect(applied).toEqual([2]);
  });
});
