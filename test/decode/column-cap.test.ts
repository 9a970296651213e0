import { SYSTEM_FIELDS } from '../../src/staging/system-columns';
import { column, decodeAll, decoder } from './fixture';

/** Regression tests: one wide record made the inferred table 20,000 columns wide. */
describe('cap on inferred columns', () => {
  test('a 20,000-key record is a dead letter (too-many-columns) under the default cap of 256, not 20,000 columns', () => {
    const wide = JSON.stringify(Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, i])));
    const d = decoder();
    const out = decodeAll(d, ['{"a":1}', wide, '{"a":2}']);
    expect(out.deadLetters).toEqual([
      expect.objectContaining({
        offset: 1,
        reason: 'too-many-columns',
        detail: expect.stringMatching(/maxInferredColumns 256.*json/) as unknown,
      }),
    ]);
    expect(out.batch!.schema.fields.slice(SYSTEM_FIELDS.length).map((f) => f.name)).toEqual(['a']);
    expect(column(out.batch!, 'a')).toEqual([1, 2]);
  });

  test('the cap counts every data column (known and inferred); existing columns stay writable at the cap', () => {
    const d = decoder({ maxInferredColumns: 3, knownFields: [{ name: 'a', type: 'float64' }] });
    const out = decodeAll(d, [
      '{"b":1}',
      '{"c":1,"d":1}',
      '{"c":2}',
      '{"d":3}',
      '{"a":4,"b":5,"c":6,"n":null}',
    ]);
    expect(out.deadLetters.map((v) => [v.offset, v.reason])).toEqual([
      [1, 'too-many-columns'],
      [3, 'too-many-columns'],
    ]);
    expect(out.batch!.schema.fields.slice(SYSTEM_FIELDS.length).map((f) => f.name)).toEqual(['a', 'b', 'c']);
    expect(column(out.batch!, 'c')).toEqual([null, 2, 6]);
  });
});
