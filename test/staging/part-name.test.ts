import fc from 'fast-check';
import { MAX_TIMESTAMP_MS, MIN_TIMESTAMP_MS } from '../../src/decode/timestamp';
import { formatPartName, minuteKeyOf, parsePartName } from '../../src/staging/part-name';

/** A minute key the catalog's pattern cannot parse is a part that is committed but never published. */
describe('minute keys', () => {
  const roundTrip = (ms: number) => {
    const minute = minuteKeyOf(ms);
    const name = formatPartName(
      { schemaKey: '0123456789abcdef', minute, id: '01KB0000000000000000000000' },
      'sealed',
    );
    return parsePartName(name)?.minute;
  };

  test('minuteKeyOf of every instant the decoder accepts is a key the part-name pattern parses', () => {
    for (const ms of [MIN_TIMESTAMP_MS, MAX_TIMESTAMP_MS, 0, -1, Date.UTC(999, 0, 1)]) {
      expect(roundTrip(ms)).toBe(minuteKeyOf(ms));
    }
    fc.assert(
      fc.property(fc.integer({ min: MIN_TIMESTAMP_MS, max: MAX_TIMESTAMP_MS }), (ms) => {
        expect(roundTrip(ms)).toBe(minuteKeyOf(ms));
      }),
      { numRuns: 2000 },
    );
  });

  test('minuteKeyOf refuses an instant outside years 0000-9999 instead of naming an unparseable part', () => {
    for (const ms of [MAX_TIMESTAMP_MS + 1, MIN_TIMESTAMP_MS - 1, 1764460800000000, 8.64e15, NaN]) {
      expect(() => minuteKeyOf(ms)).toThrow(RangeError);
    }
  });
});
