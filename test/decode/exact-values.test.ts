import { parseJsonExact, stringifyJsonExact } from '../../src/decode/exact-json';
import { column, decodeAll, decoder } from './fixture';

/** Regression tests: values were changed silently (rounded, wrapped, replaced). */
describe('values are kept exactly or dead-lettered', () => {
  test('an inferred integer beyond 2^53 is never rounded into float64: a dead letter unless exact', () => {
    const d = decoder();
    const out = decodeAll(d, [
      '{"v":1.5}',
      '{"v":12345678901234567891}',
      '{"v":9007199254740993}',
      '{"v":1152921504606846976}',
    ]);
    expect(out.deadLetters.map((v) => [v.offset, v.reason])).toEqual([
      [1, 'schema-mismatch'],
      [2, 'schema-mismatch'],
    ]);
    expect(out.deadLetters[0]!.detail).toMatch(/"v".*12345678901234567891.*float64/);
    expect(column(out.batch!, 'v')).toEqual([1.5, 2 ** 60]);
  });

  test('an integer literal too large for any double is a dead letter in every numeric column, never a crash', () => {
    const huge = `1${'0'.repeat(400)}`;
    const inferred = decodeAll(decoder(), [`{"v":${huge}}`, '{"v":1}']);
    expect(inferred.deadLetters.map((v) => [v.offset, v.reason])).toEqual([[0, 'schema-mismatch']]);
    const declared = decodeAll(
      decoder({
        fields: [
          { name: 'a', type: 'int32', nullable: true },
          { name: 'b', type: 'int64', nullable: true },
          { name: 'c', type: 'timestamp', nullable: true },
        ],
      }),
      [`{"a":${huge}}`, `{"b":${huge}}`, `{"c":${huge}}`, `{"c":-${huge}}`],
    );
    expect(declared.deadLetters.map((v) => v.offset)).toEqual([0, 1, 2, 3]);
  });

  test('a declared int64 keeps every int64 exactly, beyond 2^53 and at the bounds', () => {
    const d = decoder({ fields: [{ name: 'n', type: 'int64', nullable: true }] });
    const good = [
      '9007199254740993',
      '9223372036854775807',
      '-9223372036854775808',
      '"-9223372036854775808"',
    ];
    const bad = ['9223372036854775808', '-9223372036854775809', '1e19', '12345678901234567891'];
    const out = decodeAll(
      d,
      [...good, ...bad].map((v) => `{"n":${v}}`),
    );
    expect(column(out.batch!, 'n')).toEqual([
      9007199254740993n,
      9223372036854775807n,
      -9223372036854775808n,
      -9223372036854775808n,
    ]);
    expect(out.deadLetters.map((v) => v.offset)).toEqual([4, 5, 6, 7]);
    for (const v of out.deadLetters) expect(v.detail).toMatch(/"n": expected int64/);
  });

  test('a declared timestamp of 1e20 or 2**63 is a dead letter, not a wrapped int64', () => {
    const d = decoder({ fields: [{ name: 'at', type: 'timestamp', nullable: true }] });
    const out = decodeAll(d, ['{"at":1e20}', '{"at":9223372036854775808}', '{"at":0}']);
    expect(out.deadLetters.map((v) => v.offset)).toEqual([0, 1]);
    expect(column(out.batch!, 'at').map(Number)).toEqual([0]);
  });

  test('nanosecond timestamps beyond 2^53 are read from their digits, not through a rounded double', () => {
    const d = decoder({ fields: [{ name: 'at', type: 'timestamp', nullable: true }], epochUnit: 'ns' });
    const out = decodeAll(d, ['{"at":1764496800123999999}']);
    expect(column(out.batch!, 'at').map(Number)).toEqual([1764496800123]);
  });

  test('a lone surrogate in a string column is a dead letter, not U+FFFD; a json column keeps it escaped', () => {
    const d = decoder({
      fields: [
        { name: 's', type: 'string', nullable: true },
        { name: 'j', type: 'json', nullable: true },
      ],
    });
    const out = decodeAll(d, ['{"s":"a\\ud800b"}', '{"s":"😀 \\ud83d\\ude00","j":{"k":"\\udc00"}}']);
    expect(out.deadLetters).toEqual([
      expect.objectContaining({
        offset: 0,
        reason: 'schema-mismatch',
        detail: expect.stringMatching(/"s".*surrogate/) as unknown,
      }),
    ]);
    expect(column(out.batch!, 's')).toEqual(['😀 😀']);
    expect(column(out.batch!, 'j')).toEqual(['{"k":"\\udc00"}']);
  });

  test('a json column keeps integers beyond 2^53 exactly', () => {
    const d = decoder({ fields: [{ name: 'j', type: 'json', nullable: true }] });
    const out = decodeAll(d, [
      '{"j":{"id":12345678901234567891,"list":[-9007199254740993,1.5e300,"12345678901234567891"]}}',
    ]);
    expect(column(out.batch!, 'j')).toEqual([
      '{"id":12345678901234567891,"list":[-9007199254740993,1.5e+300,"12345678901234567891"]}',
    ]);
  });

  test('a transform receives integers beyond 2^53 as BigInt, exactly', () => {
    const seen: unknown[] = [];
    const d = decoder({
      fields: [{ name: 'n', type: 'int64', nullable: true }],
      transform: (r) => {
        seen.push((r.value as { n: unknown }).n);
        return r.value as { n: unknown };
      },
    });
    const out = decodeAll(d, ['{"n":9007199254740993}', '{"n":7}']);
    expect(seen).toEqual([9007199254740993n, 7]);
    expect(column(out.batch!, 'n')).toEqual([9007199254740993n, 7n]);
  });

  test('the exact reader agrees with JSON.parse on everything but big integers', () => {
    const text =
      '{"a":1,"a":12345678901234567891,"__proto__":{"x":1},"s":"12345678901234567891\\"\\\\","e":[],"o":{},"t":true,"f":false,"z":null,"d":-0.5e-3,"1":2}';
    const exact = parseJsonExact(text) as Record<string, unknown>;
    const plain = JSON.parse(text) as Record<string, unknown>;
    expect(Object.keys(exact)).toEqual(Object.keys(plain));
    expect(Object.getPrototypeOf(exact)).toBe(Object.prototype);
    expect(exact.a).toBe(12345678901234567891n);
    expect({ ...exact, a: 0 }).toEqual({ ...plain, a: 0 });
    expect(stringifyJsonExact(exact)).toBe(
      JSON.stringify(plain).replace('12345678901234567000', '12345678901234567891'),
    );
  });
});
