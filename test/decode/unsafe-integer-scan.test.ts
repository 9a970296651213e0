import fc from 'fast-check';
import { mayHoldUnsafeInteger, parseJsonExact, stringifyJsonExact } from '../../src/decode/exact-json';
import { column, decodeAll, decoder, msg } from './fixture';

/**
 * The decoder sends a record to V8's JSON.parse unless mayHoldUnsafeInteger finds a
 * number it could round. A miss would store a rounded value without a word.
 */
const bytes = (text: string) => Buffer.from(text, 'utf8');

describe('the scan that routes records past the exact JSON reader', () => {
  test('a 16-digit integer literal is found wherever it starts (the scan probes every 16th byte)', () => {
    for (let pad = 0; pad < 40; pad++) {
      for (const literal of ['1234567890123456', '-9007199254740993', '12345678901234567891']) {
        const text = `${' '.repeat(pad)}{"k":${literal}}`;
        expect([pad, literal, mayHoldUnsafeInteger(bytes(text))]).toEqual([pad, literal, true]);
        expect(mayHoldUnsafeInteger(bytes(`[${'7,'.repeat(pad)}${literal}]`))).toBe(true);
      }
    }
  });

  test('a literal of 16+ digits with a fraction or exponent is found too (the exact reader decides)', () => {
    expect(mayHoldUnsafeInteger(bytes('{"x":12345678901234567.5}'))).toBe(true);
    expect(mayHoldUnsafeInteger(bytes('{"x":1.2345678901234567e3}'))).toBe(true);
  });

  test('15 digits or fewer, and digit runs bordered by a quote (inside a string), need no exact read', () => {
    expect(mayHoldUnsafeInteger(bytes('{"n":999999999999999,"m":-123456789012345}'))).toBe(false);
    expect(mayHoldUnsafeInteger(bytes('{"trace_id":"00000000000000000000000317156075"}'))).toBe(false);
    expect(mayHoldUnsafeInteger(bytes('{"12345678901234567890":1}'))).toBe(false);
    expect(mayHoldUnsafeInteger(bytes(''))).toBe(false);
    // Inside a string but not next to its quotes: a false alarm, which only costs time.
    expect(mayHoldUnsafeInteger(bytes('{"m":"id 12345678901234567890 ok"}'))).toBe(true);
  });

  test('without an alarm, JSON.parse gives exactly what the exact reader gives (any JSON, big integers included)', () => {
    const value = fc.letrec((tie) => ({
      leaf: fc.oneof(
        fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.integer(),
        fc.string({ unit: 'binary' }),
        fc.stringMatching(/^\d{10,30}$/),
        fc.boolean(),
        fc.constant(null),
      ),
      node: fc.oneof(
        { depthSize: 'small' },
        tie('leaf'),
        fc.array(tie('node'), { maxLength: 4 }),
        fc.dictionary(fc.string(), tie('node'), { maxKeys: 4 }),
      ),
    })).node;
    fc.assert(
      fc.property(value, fc.nat(3), (v, indent) => {
        const compact = stringifyJsonExact(v)!;
        const text = indent === 0 ? compact : JSON.stringify(JSON.parse(compact), null, indent);
        const exact = parseJsonExact(compact);
        if (!mayHoldUnsafeInteger(bytes(compact))) expect(JSON.parse(compact)).toEqual(exact);
        if (!mayHoldUnsafeInteger(bytes(text))) expect(JSON.parse(text)).toEqual(parseJsonExact(text));
      }),
      { numRuns: 3_000, seed: 21 },
    );
  });

  test('a record with a numeric trace id string and a big int64 keeps both exactly', () => {
    const d = decoder({
      fields: [
        { name: 'trace_id', type: 'string', nullable: true },
        { name: 'n', type: 'int64', nullable: true },
      ],
    });
    const out = decodeAll(d, [
      '{"trace_id":"00000000000000000000000317156075","n":9007199254740993}',
      '{"trace_id":"12345678901234567890","n":-9223372036854775808}',
    ]);
    expect(out.deadLetters).toEqual([]);
    expect(column(out.batch!, 'trace_id')).toEqual([
      '00000000000000000000000317156075',
      '12345678901234567890',
    ]);
    expect(column(out.batch!, 'n')).toEqual([9007199254740993n, -9223372036854775808n]);
  });
});

test('Kafka offsets and timestamps written as two 32-bit halves read back exactly, negative times included', () => {
  const times = [0, -1, -62135596800000, 253402300799999, 1764590400123, -4294967296, 4294967296];
  const offsets = [0, 1, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1, 123456789012, 7];
  const out = decoder().decode(
    't',
    0,
    times.map((timestamp, i) => ({ ...msg(offsets[i]!, '{"a":1}'), timestampNumber: timestamp })),
  );
  expect(out.deadLetters).toEqual([]);
  const timestamp = out.batch!.getChild('_timestamp')!;
  const offset = out.batch!.getChild('_offset')!;
  expect(Array.from(timestamp.data[0]!.values as BigInt64Array)).toEqual(times.map(BigInt));
  expect(Array.from({ length: times.length }, (_, i) => offset.get(i) as unknown)).toEqual(
    offsets.map(BigInt),
  );
});
