import fc from 'fast-check';
import {
  MAX_TIMESTAMP_MS,
  MIN_TIMESTAMP_MS,
  parseIsoTimestampByPattern,
  parseTimestamp,
} from '../../src/decode/timestamp';

/**
 * `YYYY-MM-DDThh:mm:ss.sssZ` strings are read from their character codes before the
 * regular expression. A fast path that disagreed with it would store another instant,
 * or accept what the pattern refuses.
 */
const canonical = (ms: number) => new Date(ms).toISOString();

describe('the canonical UTC timestamp fast path', () => {
  test('every instant of years 0000–9999 written by toISOString reads back as itself', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: MIN_TIMESTAMP_MS, max: MAX_TIMESTAMP_MS }),
        fc.constantFrom('T', 't', ' '),
        fc.constantFrom('Z', 'z'),
        (ms, sep, zone) => {
          const text = `${canonical(ms).slice(0, 10)}${sep}${canonical(ms).slice(11, 23)}${zone}`;
          expect(parseTimestamp(text, 'ms')).toEqual({ ms });
        },
      ),
      { numRuns: 5_000, seed: 7 },
    );
  });

  test('any one character changed in a canonical string gives what the full pattern gives', () => {
    const chars = fc.constantFrom(...'0123456789-:.TtZz +x\u0660'.split(''));
    fc.assert(
      fc.property(
        fc.integer({ min: MIN_TIMESTAMP_MS, max: MAX_TIMESTAMP_MS }),
        fc.nat(23),
        chars,
        (ms, at, c) => {
          const text = canonical(ms).slice(0, at) + c + canonical(ms).slice(at + 1);
          expect([text, parseTimestamp(text, 'ms')]).toEqual([text, parseIsoTimestampByPattern(text)]);
        },
      ),
      { numRuns: 5_000, seed: 8 },
    );
  });

  test('out-of-calendar fields are refused as before: 30 February, month 13, hour 24, second 60', () => {
    for (const text of [
      '2026-02-30T00:00:00.000Z',
      '2025-02-29T00:00:00.000Z',
      '2026-13-01T00:00:00.000Z',
      '2026-00-01T00:00:00.000Z',
      '2026-01-00T00:00:00.000Z',
      '2026-01-01T24:00:00.000Z',
      '2026-01-01T00:60:00.000Z',
      '2026-01-01T00:00:60.000Z',
    ]) {
      expect([text, parseTimestamp(text, 'ms')]).toEqual([text, { invalid: expect.any(String) as string }]);
    }
    expect(parseTimestamp('2024-02-29T23:59:59.999Z', 'ms')).toEqual({
      ms: Date.UTC(2024, 1, 29, 23, 59, 59, 999),
    });
  });
});
