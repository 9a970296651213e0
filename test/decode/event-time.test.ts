import { column, decodeAll, decoder, msg } from './fixture';

/** Regression tests: event times out of range were committed and never published, or crash-looped. */
describe('event time out of range', () => {
  const declared = [{ name: 'ts', type: 'int64', nullable: true }] as const;

  test.each([
    ['inferred', undefined],
    ['declared int64', declared],
  ])(
    'a microsecond event time (1764460800000000 in a ms field, %s) is a dead letter, never a 13-digit minute key',
    (_, fields) => {
      const d = decoder({ fields: fields && [...declared], eventTimeField: 'ts' });
      const out = decodeAll(d, ['{"ts":1764460800000}', '{"ts":1764460800000000}', '{"ts":1764460860000}']);
      expect(out.minute).toEqual(['202511300000', '202511300001']);
      expect(out.deadLetters).toEqual([
        expect.objectContaining({
          offset: 1,
          reason: 'invalid-event-time',
          detail: expect.stringMatching(/"ts".*1764460800000000.*years 0000.9999/) as unknown,
        }),
      ]);
      expect(column(out.batch!, '_offset')).toEqual([0n, 2n]);
    },
  );

  test('a nanosecond event time or one >= 8.64e15 is a dead letter, not a RangeError that crash-loops the batch', () => {
    const d = decoder({ eventTimeField: 'ts' });
    const values = [
      '1764460800000000000',
      '8640000000000000',
      '8.64e15',
      '-8640000000000001',
      '"275760-09-13T00:00:00Z"',
    ];
    const out = decodeAll(d, [...values.map((v) => `{"ts":${v}}`), '{"ts":"2025-11-30T00:00:00Z"}']);
    expect(out.deadLetters.map((v) => [v.offset, v.reason])).toEqual(
      values.map((_, i) => [i, 'invalid-event-time']),
    );
    expect(out.minute).toEqual(['202511300000']);
  });

  test('with epochUnit "us" the same microsecond value is accepted, in its own minute', () => {
    const d = decoder({ eventTimeField: 'ts', epochUnit: 'us' });
    const out = decodeAll(d, ['{"ts":1764460800000000}', '{"ts":1764460859999999}']);
    expect(out.deadLetters).toEqual([]);
    expect(out.minute).toEqual(['202511300000', '202511300000']);
  });

  test('a Kafka record timestamp outside years 0000-9999 (or not a number) is a dead letter, in raw format too', () => {
    for (const format of ['json', 'raw'] as const) {
      const d = decoder({ format });
      const ok = msg(0, '{"a":1}');
      const out = d.decode('t', 0, [
        ok,
        { ...msg(1, '{"a":2}'), timestampNumber: 1764460800000000 },
        { ...msg(2, '{"a":3}'), timestampNumber: NaN },
        { ...msg(3, '{"a":4}'), timestampNumber: -1 }, // "no timestamp" in old message formats: kept as is
      ]);
      expect(out.deadLetters.map((v) => [v.offset, v.reason])).toEqual([
        [1, 'invalid-event-time'],
        [2, 'invalid-event-time'],
      ]);
      expect(out.deadLetters[0]!.detail).toMatch(/Kafka timestamp.*years 0000.9999/);
      expect(column(out.batch!, '_offset')).toEqual([0n, 3n]);
    }
  });
});
