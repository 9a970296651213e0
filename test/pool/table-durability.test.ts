import { tpKey, type DurableOffset, type TopicPartitionKey } from '../../src/common/offsets';
import { TableDurability } from '../../src/pool/table-durability';

const d = (n: number) => n as DurableOffset;
const byTable = (entries: Record<string, [string, number, number][]>) =>
  new Map(
    Object.entries(entries).map(([table, offsets]) => [
      table,
      new Map<TopicPartitionKey, DurableOffset>(offsets.map(([t, p, o]) => [tpKey(t, p), d(o)])),
    ]),
  );

describe('durable offsets across the tables of a lane', () => {
  test('a partition is durable up to the slowest table that has seen it', () => {
    const durability = new TableDurability();
    durability.saw('t', 0, 'a');
    durability.saw('t', 0, 'b');
    durability.saw('t', 1, 'a');
    const merged = durability.merge(
      byTable({
        a: [
          ['t', 0, 90],
          ['t', 1, 40],
        ],
        b: [['t', 0, 70]],
      }),
    );
    expect(merged.get(tpKey('t', 0))).toBe(70);
    expect(merged.get(tpKey('t', 1))).toBe(40);
  });

  test('a table that has seen the partition but has nothing durable yet holds it back', () => {
    const durability = new TableDurability();
    durability.saw('t', 0, 'a');
    durability.saw('t', 0, 'b');
    expect(durability.merge(byTable({ a: [['t', 0, 90]] })).has(tpKey('t', 0))).toBe(false);
  });

  test('a table that never saw the partition does not hold it back', () => {
    const durability = new TableDurability();
    durability.saw('t', 0, 'a');
    const merged = durability.merge(byTable({ a: [['t', 0, 90]], idle: [['u', 0, 3]] }));
    expect(merged.get(tpKey('t', 0))).toBe(90);
    expect(merged.has(tpKey('u', 0))).toBe(false);
  });

  test('batches that reached no table count until a table sees the partition, and follow a revoke down', () => {
    const durability = new TableDurability();
    durability.handledWithoutTable('t', 0, d(9));
    expect(durability.merge(new Map()).get(tpKey('t', 0))).toBe(9);
    durability.lower('t', 0, d(4));
    expect(durability.merge(new Map()).get(tpKey('t', 0))).toBe(4);
    durability.saw('t', 0, 'a');
    expect(durability.merge(byTable({ a: [['t', 0, 20]] })).get(tpKey('t', 0))).toBe(20);
  });
});
