/**
 * What the fuzzers (issue 13, item 5) found, each as its minimal counterexample, fixed
 * at the root. Named for the hazard.
 */
import { column, decodeAll, decoder } from '../decode/fixture';

describe('fuzz findings', () => {
  test('a float64 written by JavaScript beyond 2^53 (-67482704808384810 is how the double -67482704808384808 prints) is stored, not dead-lettered', () => {
    const d = decoder({ fields: [{ name: 'ratio', type: 'float64', nullable: true }] });
    const out = decodeAll(d, [
      `{"ratio":${JSON.stringify(-67482704808384808)}}`,
      '{"ratio":9007199254740993}',
    ]);
    expect(JSON.stringify(-67482704808384808)).toBe('-67482704808384810');
    expect(column(out.batch!, 'ratio')).toEqual([-67482704808384808]);
    // A literal that is no double's text (it would round) is still refused: exactly or not at all.
    expect(out.deadLetters.map((v) => [v.offset, v.reason])).toEqual([[1, 'schema-mismatch']]);
  });
});
