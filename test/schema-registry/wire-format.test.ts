import { MAX_MESSAGE_INDEXES, messageIndexesOf } from '../../src/schema-registry/wire-format';

const header = [0, 0, 0, 0, 7];
const read = (...rest: number[]) => messageIndexesOf(Uint8Array.from([...header, ...rest]));

describe("a Protobuf value's message-index list", () => {
  test('the single byte 0 is [0], the first message, and the payload starts right after it', () => {
    expect(read(0, 0x08, 0x01)).toEqual({ indexes: [0], payloadOffset: 6 });
  });

  test('a count and indexes are zig-zag varints: [1] is 02 02, [3, 0, 2] is 06 06 00 04', () => {
    expect(read(0x02, 0x02, 0x0a)).toEqual({ indexes: [1], payloadOffset: 7 });
    expect(read(0x06, 0x06, 0x00, 0x04)).toEqual({ indexes: [3, 0, 2], payloadOffset: 9 });
  });

  test('an index above 63 takes a multi-byte varint (zig-zag 200 is c8 01, i.e. 100)', () => {
    expect(read(0x02, 0xc8, 0x01)).toEqual({ indexes: [100], payloadOffset: 8 });
  });

  test('a value that ends inside the list, a negative count or index, or a count beyond the bound is invalid', () => {
    expect(read()).toEqual({
      invalid: expect.stringMatching(/ends inside the message-index list's count/) as unknown,
    });
    expect(read(0x04, 0x02)).toEqual({ invalid: expect.stringMatching(/ends inside .*index 1/) as unknown });
    expect(read(0x01)).toEqual({ invalid: expect.stringMatching(/count of -1/) as unknown });
    expect(read(0x02, 0x01)).toEqual({
      invalid: expect.stringMatching(/message index -1 is negative/) as unknown,
    });
    const tooMany = (MAX_MESSAGE_INDEXES + 1) * 2;
    expect(read((tooMany % 128) | 0x80, Math.floor(tooMany / 128))).toEqual({
      invalid: expect.stringMatching(/without the message-index list/) as unknown,
    });
    expect(read(0xff, 0xff, 0xff, 0xff, 0xff, 0x01)).toEqual({
      invalid: expect.stringMatching(/longer than 5 bytes/) as unknown,
    });
  });
});
