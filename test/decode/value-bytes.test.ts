import { ValueBytes } from '../../src/decode/column-builder';

/**
 * The compiled Avro and Protobuf readers append strings as slices of the batch's buffer:
 * short ones copied byte by byte, longer ones by Buffer.copy. Both ways, and across the
 * buffer's growth, the values must land back to back exactly as they were in the source.
 */
test('slices of every length around the short-copy limit land back to back, across growth', () => {
  const source = Buffer.alloc(4096);
  for (let i = 0; i < source.length; i++) source[i] = (i * 31 + 7) & 0xff;
  const values = new ValueBytes();
  const expected: number[] = [];
  let start = 3;
  for (const length of [0, 1, 2, 31, 32, 33, 64, 300, 1, 1500, 32, 0, 33]) {
    expect(values.appendSlice(source, start, start + length)).toBe(length);
    expected.push(...source.subarray(start, start + length));
    start = (start + length + 5) % 2000;
  }
  expect(values.position).toBe(expected.length);
  expect([...values.view()]).toEqual(expected);
});

test('a slice at the very end of its source is copied whole', () => {
  const source = Buffer.from('abcdefghijklmnopqrstuvwxyz0123456789');
  const values = new ValueBytes();
  values.appendSlice(source, source.length - 5, source.length);
  values.appendSlice(source, 0, source.length);
  expect(Buffer.from(values.view()).toString()).toBe('56789' + source.toString());
});
