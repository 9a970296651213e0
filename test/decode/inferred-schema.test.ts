import { SYSTEM_FIELDS } from '../../src/staging/system-columns';
import { schemaKeyOf } from '../../src/staging/schema-key';
import { column, decodeAll, decoder } from './fixture';

/** Regression tests: inferred columns Lance refuses, and types that differ between workers. */
describe('inferred schema rules', () => {
  test('an inferred key Lance cannot take as a column ("a.b", "", "a`b", a lone surrogate) is a dead letter naming the key', () => {
    const d = decoder();
    const bad = [
      '{"a.b":1}',
      '{"":1}',
      '{"a`b":"x"}',
      '{"\\ud800":true}',
      '{"ok":1,"x.y":null}',
      '{"_offset":1}',
    ];
    const out = decodeAll(d, [...bad, '{"ok":2,"a b":1,"ä":2,"A":3,"a":4}']);
    expect(out.deadLetters.map((v) => [v.offset, v.reason])).toEqual(
      bad.map((_, i) => [i, 'schema-mismatch']),
    );
    expect(out.deadLetters.map((v) => v.detail)).toEqual([
      expect.stringMatching(/key "a\.b".*"\."/),
      expect.stringMatching(/key "".*empty/),
      expect.stringMatching(/key "a`b".*"`"/),
      expect.stringMatching(/key "\\ud800".*surrogate/),
      expect.stringMatching(/key "x\.y"/),
      expect.stringMatching(/key "_offset".*reserved/),
    ]);
    // Names Lance does take (measured with LanceDB 0.39): spaces, non-ASCII, case-distinct.
    expect(out.batch!.schema.fields.slice(SYSTEM_FIELDS.length).map((f) => f.name)).toEqual([
      'ok',
      'a b',
      'ä',
      'A',
      'a',
    ]);
    expect(column(out.batch!, 'ok')).toEqual([2]);
  });

  test('inference is per JSON kind, so workers that see 1, 1.5 or 2^60 first stage the same Arrow type', () => {
    const keys = ['{"v":1}', '{"v":1.5}', '{"v":1152921504606846976}'].map(
      (value) => decodeAll(decoder(), [value]).batch!.schema,
    );
    expect(keys.map((s) => String(s.fields[SYSTEM_FIELDS.length]!.type))).toEqual([
      'Float64',
      'Float64',
      'Float64',
    ]);
    expect(new Set(keys.map(schemaKeyOf)).size).toBe(1);
  });

  test('decoders seeded with the table\'s columns (knownFields) keep their types: {"v":"1"} into float64 is a dead letter', () => {
    const knownFields = [
      { name: 'v', type: 'float64' },
      { name: 's', type: 'string' },
      { name: '_offset', type: 'int64' }, // a system column of the table: not a data column
    ] as const;
    const a = decodeAll(decoder({ knownFields }), ['{"v":1}']);
    const b = decodeAll(decoder({ knownFields }), ['{"v":"1"}', '{"w":true}', '{"s":5}']);
    expect(a.deadLetters).toEqual([]);
    expect(b.deadLetters).toEqual([
      expect.objectContaining({
        offset: 0,
        reason: 'schema-mismatch',
        detail: expect.stringMatching(/"v": expected float64, got string/) as unknown,
      }),
      expect.objectContaining({
        offset: 2,
        detail: expect.stringMatching(/"s": expected string, got number/) as unknown,
      }),
    ]);
    const fields = (batch: typeof a.batch) =>
      batch!.schema.fields.slice(SYSTEM_FIELDS.length).map((f) => `${f.name}:${String(f.type)}`);
    expect(fields(a.batch)).toEqual(['v:Float64', 's:Utf8']);
    expect(fields(b.batch)).toEqual(['v:Float64', 's:Utf8', 'w:Bool']);
  });
});
