import fc from 'fast-check';
import type { DecoderOptions, RawMessage } from '../../src/decode/record-decoder';
import { RecordDecoder } from '../../src/decode/record-decoder';
import type { DeadLetterReason } from '../../src/dead-letters/dead-letter-reason';
import { parseTimestamp } from '../../src/decode/timestamp';
import { FIELD_CODECS } from '../../src/decode/field-codec';
import { parseJsonExact } from '../../src/decode/exact-json';
import { FUZZ_FIELDS, fuzzValue, type FuzzValue, type ValidRecord } from './arbitraries';

/**
 * The decoder fuzzers, shared by the jest suite (few runs) and
 * qualify/steps/fuzz.ts (many): each property returns fast-check's verdict and counts
 * what it saw, so that a caller can assert or report.
 */
export const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);

const REASONS: ReadonlySet<DeadLetterReason> = new Set<DeadLetterReason>([
  'invalid-utf8',
  'invalid-json',
  'not-an-object',
  'schema-mismatch',
  'too-many-columns',
  'invalid-event-time',
  'too-large',
  'tombstone',
  'transform-failed',
]);

export const declaredOptions: DecoderOptions = {
  format: 'json',
  fields: FUZZ_FIELDS.map((f) => ({ ...f })),
  transform: undefined,
  eventTimeField: undefined,
  includeKey: false,
  maxRecordBytes: 1024 * 1024,
  tombstones: 'dead-letter',
  epochUnit: 'ms',
  maxInferredColumns: 32,
};

export const inferOptions: DecoderOptions = { ...declaredOptions, fields: undefined };

export interface FuzzCounts {
  records: number;
  rows: number;
  valid: number;
  deadLetters: Partial<Record<DeadLetterReason, number>>;
}

export const newCounts = (): FuzzCounts => ({ records: 0, rows: 0, valid: 0, deadLetters: {} });

export const messagesOf = (values: readonly FuzzValue[]): RawMessage[] =>
  values.map((v, i) => ({ offsetNumber: 1_000 + i, timestampNumber: NOW + i, key: null, value: v.value }));

/**
 * One decode of fuzzed values: it must not throw; every offset is exactly one row or
 * one dead letter with a known reason and a detail; with the declared schema, every
 * valid record is a row holding exactly its values. Throws (an assertion) otherwise.
 */
export function checkDecode(options: DecoderOptions, values: readonly FuzzValue[], counts: FuzzCounts): void {
  const decoder = new RecordDecoder(options, () => NOW);
  const messages = messagesOf(values);
  const out = decoder.decode('fuzz', 0, messages);
  const rowOffsets = new Map<number, number>();
  const offsets = out.batch?.getChild('_offset');
  for (let i = 0; i < (out.batch?.numRows ?? 0); i++) rowOffsets.set(Number(offsets!.get(i) as bigint), i);
  const dead = new Map<number, string>();
  for (const d of out.deadLetters) {
    if (dead.has(d.offset)) throw new Error(`offset ${d.offset} dead-lettered twice`);
    if (!REASONS.has(d.reason)) throw new Error(`unknown reason ${String(d.reason)}`);
    if (typeof d.detail !== 'string' || d.detail.length === 0) throw new Error(`no detail for ${d.offset}`);
    dead.set(d.offset, d.reason);
    counts.deadLetters[d.reason] = (counts.deadLetters[d.reason] ?? 0) + 1;
  }
  messages.forEach((m, i) => {
    const row = rowOffsets.get(m.offsetNumber);
    if ((row === undefined) === !dead.has(m.offsetNumber))
      throw new Error(
        `offset ${m.offsetNumber}: ${row === undefined ? 'neither row nor dead letter' : 'both row and dead letter'}`,
      );
    const v = values[i]!;
    if (v.kind !== 'valid' || options.fields === undefined) return;
    if (row === undefined)
      throw new Error(`valid record at ${m.offsetNumber} dead-lettered: ${dead.get(m.offsetNumber)}`);
    expectExact(out.batch!, row, v.record);
    counts.valid += 1;
  });
  counts.records += messages.length;
  counts.rows += out.batch?.numRows ?? 0;
}

function expectExact(
  batch: NonNullable<ReturnType<RecordDecoder['decode']>['batch']>,
  row: number,
  r: ValidRecord,
) {
  const get = (name: string) => batch.getChild(name)!.get(row) as unknown;
  const same = (name: string, actual: unknown, expected: unknown) => {
    if (actual !== expected)
      throw new Error(
        `${name}: stored ${String(actual)} for ${String(expected)} (${JSON.stringify(String(expected))})`,
      );
  };
  same('n', get('n'), r.n);
  same('small', get('small'), r.small);
  same('ratio', get('ratio'), r.ratio === null ? null : r.ratio === 0 ? 0 : r.ratio);
  same('flag', get('flag'), r.flag);
  same('label', get('label'), r.label);
  const at = get('at');
  same('at', at === null ? null : Number(at), r.at);
  const meta = get('meta') as string | null;
  const expected = r.meta === null || r.meta === undefined ? null : JSON.stringify(r.meta);
  same('meta', meta === null ? null : JSON.stringify(JSON.parse(meta)), expected);
}

export interface PropertyRun {
  readonly name: string;
  readonly runs: number;
  readonly failed: boolean;
  readonly counterexample?: string;
  readonly error?: string;
  readonly seed: number;
  readonly counts: FuzzCounts;
}

function run<T>(
  name: string,
  arb: fc.Arbitrary<T>,
  check: (t: T, c: FuzzCounts) => void,
  numRuns: number,
  seed: number,
): PropertyRun {
  const counts = newCounts();
  const details = fc.check(
    fc.property(arb, (t) => {
      check(t, counts);
    }),
    { numRuns, seed },
  );
  return {
    name,
    runs: details.numRuns,
    failed: details.failed,
    seed,
    counts,
    ...(details.failed
      ? {
          counterexample: fc.stringify(details.counterexample),
          error:
            details.errorInstance instanceof Error
              ? details.errorInstance.message
              : String(details.errorInstance),
        }
      : {}),
  };
}

const values = fc.array(fuzzValue, { minLength: 1, maxLength: 12 });

/** Every decoder property, `numRuns` each. */
export function fuzzDecoders(numRuns: number, seed: number): PropertyRun[] {
  return [
    run(
      'record decoder, declared schema',
      values,
      (v, c) => checkDecode(declaredOptions, v, c),
      numRuns,
      seed,
    ),
    run(
      'record decoder, inferred schema',
      values,
      (v, c) => checkDecode(inferOptions, v, c),
      numRuns,
      seed + 1,
    ),
    exactParserStrict(numRuns, seed + 2),
    run(
      'timestamp: any value gives a time within years 0000-9999 or a reason',
      fc.tuple(fc.anything({ withBigInt: true }), fc.constantFrom('s', 'ms', 'us', 'ns' as const)),
      ([v, unit], c) => {
        c.records += 1;
        const t = parseTimestamp(v, unit);
        if ('ms' in t) {
          if (!Number.isSafeInteger(t.ms) || t.ms < -62_167_219_200_000 || t.ms > 253_402_300_799_999)
            throw new Error(`out of range: ${t.ms}`);
          c.valid += 1;
        } else if (typeof t.invalid !== 'string' || t.invalid.length === 0) throw new Error('no reason');
      },
      numRuns,
      seed + 3,
    ),
    run(
      'field codecs: any value converts or is Invalid, never throws',
      fc.tuple(
        fc.anything({ withBigInt: true, withNullPrototype: true }),
        fc.constantFrom(...FUZZ_FIELDS.map((f) => f.type)),
      ),
      ([v, type], c) => {
        c.records += 1;
        FIELD_CODECS[type].convert(v, 'ms');
      },
      numRuns,
      seed + 4,
    ),
  ];
}

/** ParseJsonExact on arbitrary text and on JSON: refuses exactly what JSON.parse refuses; same values. */
function exactParserStrict(numRuns: number, seed: number): PropertyRun {
  return run(
    'exact JSON parser vs JSON.parse',
    fc.oneof(
      fc.string({ unit: 'binary', maxLength: 60 }),
      fc.json({ maxDepth: 4 }),
      fc.constantFrom('[1,]', '01', '1.', '-', '"\\x"', '\u00a0{}', '{"a":1}x'),
    ),
    (text, c) => {
      c.records += 1;
      let plain: unknown;
      let plainOk = true;
      try {
        plain = JSON.parse(text);
      } catch {
        plainOk = false;
      }
      let exact: unknown;
      let exactOk = true;
      try {
        exact = parseJsonExact(text);
      } catch (error) {
        if (!(error instanceof Error)) throw new Error('threw a non-Error');
        exactOk = false;
      }
      if (plainOk !== exactOk)
        throw new Error(
          `JSON.parse ${plainOk ? 'accepts' : 'refuses'}, parseJsonExact ${exactOk ? 'accepts' : 'refuses'}`,
        );
      if (!plainOk) return;
      c.valid += 1;
      const norm = (v: unknown) =>
        JSON.stringify(v, (_, x: unknown) => (typeof x === 'bigint' ? Number(x) : x));
      if (norm(exact) !== norm(plain)) throw new Error(`differs from JSON.parse: ${String(norm(exact))}`);
    },
    numRuns,
    seed,
  );
}
