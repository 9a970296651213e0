import fc from 'fast-check';

/**
 * Inputs for the fuzzers: valid records of the fuzz schema, and the
 * ways bytes go wrong on the way to a decoder (truncation, bit flips, huge numbers,
 * deep nesting, invalid UTF-8, NUL, lone surrogates, arbitrary bytes).
 */
export const FUZZ_FIELDS = [
  { name: 'n', type: 'int64', nullable: false },
  { name: 'small', type: 'int32', nullable: true },
  { name: 'ratio', type: 'float64', nullable: true },
  { name: 'flag', type: 'boolean', nullable: true },
  { name: 'label', type: 'string', nullable: true },
  { name: 'at', type: 'timestamp', nullable: true },
  { name: 'meta', type: 'json', nullable: true },
] as const;

/** A value each field decodes exactly, and the record it is in. */
export interface ValidRecord {
  readonly n: bigint;
  readonly small: number | null;
  readonly ratio: number | null;
  readonly flag: boolean | null;
  readonly label: string | null;
  /** Epoch ms. */
  readonly at: number | null;
  readonly meta: unknown;
}

const wellFormed = fc.string({ unit: 'grapheme', maxLength: 24 });

export const validRecord: fc.Arbitrary<ValidRecord> = fc.record({
  n: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
  small: fc.option(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 })),
  ratio: fc.option(fc.double({ noNaN: true, noDefaultInfinity: true })),
  flag: fc.option(fc.boolean()),
  label: fc.option(wellFormed),
  at: fc.option(fc.integer({ min: 0, max: 253_402_300_799_999 })),
  meta: fc.option(fc.jsonValue({ maxDepth: 3 })),
});

/** The record as a producer writes it (bigints as bare digits, like exact-json reads them). */
export function encodeRecord(r: ValidRecord): string {
  const parts = [`"n":${r.n.toString()}`];
  if (r.small !== null) parts.push(`"small":${r.small}`);
  if (r.ratio !== null) parts.push(`"ratio":${JSON.stringify(r.ratio)}`);
  if (r.flag !== null) parts.push(`"flag":${r.flag}`);
  if (r.label !== null) parts.push(`"label":${JSON.stringify(r.label)}`);
  if (r.at !== null) parts.push(`"at":${r.at}`);
  if (r.meta !== null && r.meta !== undefined) parts.push(`"meta":${JSON.stringify(r.meta)}`);
  return `{${parts.join(',')}}`;
}

const enc = new TextEncoder();

export type Mutation =
  | { readonly kind: 'truncate'; readonly at: number }
  | { readonly kind: 'flip'; readonly at: number; readonly bit: number }
  | { readonly kind: 'insert'; readonly at: number; readonly bytes: readonly number[] }
  | { readonly kind: 'replace-number'; readonly digits: string }
  | { readonly kind: 'nest'; readonly depth: number; readonly open: '[' | '{"a":' }
  | { readonly kind: 'field-value'; readonly field: string; readonly json: string };

/** Byte sequences that break decoders: NUL, invalid UTF-8, a UTF-8-encoded lone surrogate, a BOM, quotes. */
const nastyBytes = fc.constantFrom<readonly number[]>(
  [0x00],
  [0xff],
  [0xc0, 0x80],
  [0xed, 0xa0, 0x80], // U+D800 as (invalid) UTF-8
  [0xef, 0xbb, 0xbf],
  [0x22],
  [0x5c],
  [0xf4, 0x90, 0x80, 0x80], // beyond U+10FFFF
  [0xe2, 0x82], // truncated sequence
);

const hugeDigits = fc.oneof(
  fc.bigInt({ min: 2n ** 63n, max: 2n ** 200n }).map(String),
  fc.bigInt({ min: -(2n ** 200n), max: -(2n ** 63n) - 1n }).map(String),
  fc.constantFrom('1e309', '-1e309', '1e-400', '9'.repeat(400), '0.' + '0'.repeat(300) + '1', '-0', '1E+2'),
);

/** JSON texts a field may receive that its type cannot hold (or barely can). */
const oddFieldJson = fc.oneof(
  hugeDigits,
  fc.constantFrom(
    '"\\ud800"',
    '"\\udc00x"',
    '"a\\u0000b"',
    'null',
    'true',
    '[]',
    '{}',
    '"2026-11-30T12:00:00Z"',
    '"0000-01-01T00:00:00Z"',
    '"+275760-09-13T00:00:00Z"',
    '"not a time"',
    '1.5',
    '-2147483649',
    '2147483648',
    '9007199254740993',
    '-9223372036854775809',
    '1e400',
  ),
  fc.string({ maxLength: 12 }).map((s) => JSON.stringify(s)),
);

export const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), bytes: nastyBytes }),
  fc.record({ kind: fc.constant('replace-number' as const), digits: hugeDigits }),
  fc.record({
    kind: fc.constant('nest' as const),
    depth: fc.oneof(fc.integer({ min: 1, max: 64 }), fc.constantFrom(1_000, 10_000, 100_000)),
    open: fc.constantFrom('[' as const, '{"a":' as const),
  }),
  fc.record({
    kind: fc.constant('field-value' as const),
    field: fc.constantFrom(...FUZZ_FIELDS.map((f) => f.name), 'extra', ''),
    json: oddFieldJson,
  }),
);

/** Applies one mutation to a record's bytes (text edits work on the bytes as latin1, so any byte survives). */
export function mutate(input: Uint8Array, m: Mutation): Uint8Array {
  const latin1 = () => Buffer.from(input).toString('latin1');
  const bytesOf = (s: string) => new Uint8Array(Buffer.from(s, 'latin1'));
  switch (m.kind) {
    case 'truncate':
      return input.slice(0, m.at % (input.length + 1));
    case 'flip': {
      const bytes = input.slice();
      if (bytes.length > 0) bytes[m.at % bytes.length]! ^= 1 << m.bit;
      return bytes;
    }
    case 'insert': {
      const at = m.at % (input.length + 1);
      return Uint8Array.from([...input.subarray(0, at), ...m.bytes, ...input.subarray(at)]);
    }
    case 'replace-number':
      return bytesOf(latin1().replace(/-?\d+(\.\d+)?([eE][+-]?\d+)?/, m.digits));
    case 'nest': {
      const close = m.open === '[' ? ']' : '}';
      return enc.encode(`{"n":1,"meta":${m.open.repeat(m.depth)}0${close.repeat(m.depth)}}`);
    }
    case 'field-value': {
      const text = latin1();
      const body = text.endsWith('}') ? text.slice(0, -1) : text;
      return bytesOf(`${body}${body.length > 1 ? ',' : ''}${JSON.stringify(m.field)}:${m.json}}`);
    }
  }
}

/** One fuzzed Kafka value: arbitrary bytes, a mutated valid record, or a valid record. */
export type FuzzValue =
  | { readonly kind: 'bytes'; readonly value: Uint8Array | null }
  | { readonly kind: 'mutated'; readonly value: Uint8Array }
  | { readonly kind: 'valid'; readonly value: Uint8Array; readonly record: ValidRecord };

export const fuzzValue: fc.Arbitrary<FuzzValue> = fc.oneof(
  fc.record({
    kind: fc.constant('bytes' as const),
    value: fc.option(fc.uint8Array({ maxLength: 200 }), { freq: 20 }),
  }),
  fc.tuple(validRecord, fc.array(mutation, { minLength: 1, maxLength: 3 })).map(([r, ms]) => ({
    kind: 'mutated' as const,
    value: ms.reduce<Uint8Array>((bytes, m) => mutate(bytes, m), enc.encode(encodeRecord(r))),
  })),
  validRecord.map((record) => ({ kind: 'valid' as const, value: enc.encode(encodeRecord(record)), record })),
);
