import { parseDuration } from '../../src/cli/compact';
import { CliError } from '../../src/cli/errors';
import { badCount, isBad, logRecord } from '../../src/cli/log-records';

describe('log records', () => {
  test.each([0, 0.005, 0.01, 0.05, 0.29, 1 / 3, 0.5, 1])(
    'bad ratio %p: exactly floor(count x ratio) of the first count records are broken, none of them JSON',
    (ratio) => {
      for (const count of [1, 7, 100, 1_000, 2_999]) {
        let bad = 0;
        for (let n = 0; n < count; n++) {
          const r = logRecord(n, 0, { badRatio: ratio });
          expect(r.bad).toBe(isBad(n, ratio));
          if (r.bad) {
            bad++;
            expect(() => JSON.parse(r.value) as unknown).toThrow();
          } else {
            expect(JSON.parse(r.value)).toMatchObject({ level: r.level });
          }
        }
        expect(bad).toBe(badCount(count, ratio));
        expect(bad).toBe(Math.floor(count * ratio + 1e-9));
      }
    },
  );

  test('--record-bytes pads good records to about that size', () => {
    for (const size of [400, 1_024, 10_000]) {
      for (let n = 0; n < 50; n++) {
        const bytes = Buffer.byteLength(logRecord(n, Date.now(), { badRatio: 0, recordBytes: size }).value);
        expect(Math.abs(bytes - size)).toBeLessThanOrEqual(8);
      }
    }
  });

  test('an error line reads like an error', () => {
    for (let n = 0; n < 100; n++) {
      const r = JSON.parse(logRecord(n, 0, { badRatio: 0 }).value) as { level: string; status: number };
      expect(r.level === 'error').toBe(r.status >= 500);
    }
  });
});

describe('--retention durations', () => {
  test.each([
    ['1h', 3_600_000],
    ['90m', 5_400_000],
    ['1h30m', 5_400_000],
    ['7d', 604_800_000],
    ['0s', 0],
    ['500ms', 500],
  ])('%s', (text, ms) => expect(parseDuration(text)).toBe(ms));

  test.each(['', '1', 'h', '1x', '1h junk', '-1h'])('%p is refused with the accepted forms', (text) => {
    expect(() => parseDuration(text)).toThrow(CliError);
    expect(() => parseDuration(text)).toThrow(/write it like 30m, 1h/);
  });
});
