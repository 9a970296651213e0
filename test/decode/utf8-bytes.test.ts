import { isUtf8 } from 'node:buffer';
import fc from 'fast-check';
import { utf8At } from '../../src/decode/utf8-bytes';

/** The compiled readers' UTF-8 check must refuse exactly what node's isUtf8 refuses (avsc and protobufjs's readers are held to it). */
describe('utf8At', () => {
  const leaning = fc.array(
    fc.oneof(
      fc.integer({ min: 0, max: 255 }),
      fc.constantFrom(
        0x80,
        0xbf,
        0xc0,
        0xc1,
        0xc2,
        0xdf,
        0xe0,
        0xed,
        0xef,
        0xf0,
        0xf4,
        0xf5,
        0x9f,
        0xa0,
        0x8f,
        0x90,
      ),
    ),
    { maxLength: 12 },
  );

  test('agrees with isUtf8 on bytes leaning to the edges of the encoding, inside a larger buffer', () => {
    fc.assert(
      fc.property(leaning, leaning, leaning, (before, bytes, after) => {
        const buf = Uint8Array.from([...before, ...bytes, ...after]);
        const start = before.length;
        expect(utf8At(buf, start, start + bytes.length)).toBe(isUtf8(Uint8Array.from(bytes)));
      }),
      { numRuns: 20_000 },
    );
  });

  test('agrees with isUtf8 on text, and on text cut inside a character', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.nat(), (text, cut) => {
        const bytes = Buffer.from(text, 'utf8');
        const end = bytes.length === 0 ? 0 : cut % (bytes.length + 1);
        expect(utf8At(bytes, 0, end)).toBe(isUtf8(bytes.subarray(0, end)));
      }),
    );
  });
});
