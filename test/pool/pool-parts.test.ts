import { BoundedBudget } from '../../src/common/bounded-budget';
import { packMessages, unpackMessages } from '../../src/pool/packed-messages';

describe('bounded budget', () => {
  test('waits until both records and bytes fit, first come first served', async () => {
    const b = new BoundedBudget(10, 1_000);
    await b.acquire(6, 100);
    const order: string[] = [];
    const second = b.acquire(6, 100).then(() => order.push('second'));
    const third = b.acquire(1, 10).then(() => order.push('third'));
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual([]); // third would fit, but must not overtake second
    b.release(6, 100);
    await Promise.all([second, third]);
    expect(order).toEqual(['second', 'third']);
    expect(b.records).toBe(7);
  });

  test('a request larger than the whole budget runs alone instead of deadlocking', async () => {
    const b = new BoundedBudget(10, 100);
    await b.acquire(1, 50);
    let admitted = false;
    const big = b.acquire(1, 5_000).then(() => (admitted = true));
    await new Promise((r) => setImmediate(r));
    expect(admitted).toBe(false);
    b.release(1, 50);
    await big;
    expect(b.bytes).toBe(5_000);
  });

  test('releasing more than was lent is a bug and says so', () => {
    expect(() => new BoundedBudget(1, 1).release(1, 0)).toThrow(/released more/);
  });
});

test('packed messages round-trip keys, values and nulls through two buffers', () => {
  const messages = [
    { offset: '5', timestamp: '1000', key: Buffer.from('k'), value: Buffer.from('{"a":1}') },
    { offset: '6', timestamp: '1001', key: null, value: null },
    { offset: '7', timestamp: '1002', key: Buffer.alloc(0), value: Buffer.from([0, 255]) },
  ];
  const packed = packMessages(messages);
  const out = unpackMessages(packed);
  expect(out.map((m) => [m.offsetNumber, m.timestampNumber])).toEqual([
    [5, 1000],
    [6, 1001],
    [7, 1002],
  ]);
  expect(Buffer.from(out[0]!.value!).toString()).toBe('{"a":1}');
  expect(out[1]!.key).toBeNull();
  expect(out[1]!.value).toBeNull();
  expect(out[2]!.key!.byteLength).toBe(0);
  expect(Array.from(out[2]!.value!)).toEqual([0, 255]);
});
