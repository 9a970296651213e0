import { rowsKept } from '../../src/lance/store-probe';

describe("the start probe's verdict counts each writer's rows", () => {
  const perWriter = 200;
  const expected = [-1, 0, 1]; // the seed rows and two fulfilled adds; writer 2's add was rejected

  test("a rejected add that committed anyway does not make up for another writer's lost commit", () => {
    // Writer 1's commit was overwritten; writer 2's rejected add committed: the same total.
    const byWriter = new Map([
      [-1, perWriter],
      [0, perWriter],
      [2, perWriter],
    ]);
    const total = [...byWriter.values()].reduce((a, b) => a + b, 0);
    expect(total).toBe(perWriter * expected.length);
    expect(rowsKept(expected, byWriter, perWriter)).toBe(2 * perWriter);
  });

  test('a writer whose rows are all there counts once, however many a committed rejected add left', () => {
    const byWriter = new Map([
      [-1, perWriter],
      [0, perWriter],
      [1, perWriter],
      [2, perWriter],
    ]);
    expect(rowsKept(expected, byWriter, perWriter)).toBe(perWriter * expected.length);
  });

  test('rows of one writer beyond its own count do not cover a part of another writer lost', () => {
    const byWriter = new Map([
      [-1, perWriter],
      [0, 2 * perWriter],
      [1, perWriter - 1],
    ]);
    expect(rowsKept(expected, byWriter, perWriter)).toBe(3 * perWriter - 1);
  });
});
