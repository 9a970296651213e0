import {
  DELETE,
  INSERT,
  UPDATE,
  changePlan,
  changeValue,
  expectedTable,
  planCounts,
  type ChangePlan,
} from '../../bench/lib/upsert-changes';

test('the change plan is 80 % updates and 10 % tombstones of seeded keys, 10 % keys new once each', () => {
  const plan = changePlan(1_000, 100_000);
  const counts = planCounts(plan);
  expect(counts.updates / 100_000).toBeCloseTo(0.8, 2);
  expect(counts.inserts / 100_000).toBeCloseTo(0.1, 2);
  expect(counts.deletes / 100_000).toBeCloseTo(0.1, 2);
  const inserted = new Set<number>();
  let misplaced = 0;
  for (let i = 0; i < plan.keys.length; i++) {
    const k = plan.keys[i]!;
    if (plan.kinds[i] === INSERT) {
      if (k < 1_000) misplaced++;
      inserted.add(k);
    } else if (k >= 1_000) misplaced++;
  }
  expect(misplaced).toBe(0);
  expect(inserted.size).toBe(counts.inserts);
});

test('the plan is the same on every run, so a produced topic can be reused', () => {
  const a = changePlan(500, 2_000);
  const b = changePlan(500, 2_000);
  expect(Buffer.from(a.keys.buffer).equals(Buffer.from(b.keys.buffer))).toBe(true);
  expect(Buffer.from(a.kinds.buffer).equals(Buffer.from(b.kinds.buffer))).toBe(true);
});

test('a tombstone has a null value and counts no bytes; every other value is ~100 bytes', () => {
  const plan = changePlan(1_000_000, 1_000);
  let bytes = 0;
  for (let i = 0; i < 1_000; i++) {
    const value = changeValue(plan, i);
    if (plan.kinds[i] === DELETE) expect(value).toBeNull();
    else {
      expect(Buffer.byteLength(value!)).toBeGreaterThan(80);
      expect(Buffer.byteLength(value!)).toBeLessThan(120);
      expect(JSON.parse(value!)).toEqual(expect.objectContaining({ n: i }));
      bytes += Buffer.byteLength(value!);
    }
  }
  expect(planCounts(plan).valueBytes).toBe(bytes);
});

test("the expected table keeps a key's last change: a delete after an update deletes it, an update after a delete brings it back", () => {
  // Seeded keys 0..3; key 4 is new.
  const plan: ChangePlan = {
    seedKeys: 4,
    keys: Int32Array.from([0, 0, 1, 1, 4, 2, 2]),
    kinds: Uint8Array.from([UPDATE, DELETE, DELETE, UPDATE, INSERT, DELETE, DELETE]),
  };
  const table = expectedTable(plan);
  expect(table.newest(0)).toEqual({ change: 1, deleted: true });
  expect(table.newest(1)).toEqual({ change: 3, deleted: false });
  expect(table.newest(2)).toEqual({ change: 6, deleted: true });
  expect(table.newest(3)).toBeUndefined();
  expect(table.newest(4)).toEqual({ change: 4, deleted: false });
  expect(table.newest(99)).toBeUndefined();
  // Deleted keys stay as rows: 4 seeded + 1 new; live: those minus keys 0 and 2.
  expect(table.rows).toBe(5);
  expect(table.deletedKeys).toBe(2);
  expect(table.live).toBe(3);
});
