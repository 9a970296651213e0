/**
 * The native Avro reader (native/json-columns/src/avro.rs) against the compiled Avro reader it
 * mirrors (src/decode/avro/compiled-reader.ts): over generated writer schemas and datums —
 * edge values, invalid UTF-8, out-of-range indexes, flipped, cut and padded bytes — it must
 * take exactly the records the compiled reader takes and write the same values. Then the
 * record decoder's use of it: whole batches of one admitted writer, the same rows and dead
 * letters as the reference decoder.
 */
import * as avro from 'avsc';
import { Field, RecordBatch, Schema as ArrowSchema, Struct, makeData, type Data } from 'apache-arrow';
import fc from 'fast-check';
import { AVRO_PAYLOADS } from '../../src/decode/avro/writer-schemas';
import type { CompiledReader } from '../../src/decode/compiled-reader';
import { NativeAvroColumns } from '../../src/decode/native-avro-columns';
import { nativeJsonModule } from '../../src/decode/native-json-columns';
import type { RawMessage } from '../../src/decode/raw-message';
import { codecOf } from '../../src/decode/typed-codecs';
import { LOG_V1, LOG_V2 } from '../../src/cli/avro-log-records';
import { Random, datum, framed, recordOf } from './avro-datums';
import { decodeBoth, rowsOf } from './compiled-vs-reference';
import { msg } from './fixture';

const built = nativeJsonModule()?.AvroColumns !== undefined;
// Without cargo the module is not built and every record takes the compiled reader (CI requires it).
const maybe = built ? describe : describe.skip;

function compiledOf(schema: unknown): CompiledReader | undefined {
  try {
    return AVRO_PAYLOADS.parse(JSON.stringify(schema), []).compiled?.reader;
  } catch {
    return undefined;
  }
}

function batchOf(reader: CompiledReader, children: readonly Data[], rows: number): RecordBatch {
  const fields = reader.fields.map(
    ({ name, field }) => new Field(name, codecOf(field, 'ms').arrowType(), true),
  );
  return new RecordBatch(
    new ArrowSchema(fields),
    makeData({ type: new Struct(fields), length: rows, nullCount: 0, children: [...children] }),
  );
}

/** The compiled reader's verdicts and rows for `messages`, one record at a time. */
function compiledRead(reader: CompiledReader, messages: readonly RawMessage[]) {
  const builders = reader.fields.map(({ field }) => codecOf(field, 'ms').builder());
  const rejected: number[] = [];
  messages.forEach((m, i) => {
    const value = m.value!;
    const buf = Buffer.from(value.buffer);
    const start = value.byteOffset;
    if (reader.check(buf, start, start + value.byteLength))
      reader.append(buf, start, start + value.byteLength, builders);
    else rejected.push(i);
  });
  const rows = messages.length - rejected.length;
  return {
    rejected,
    rows: rowsOf(
      batchOf(
        reader,
        builders.map((b) => b.finish()),
        rows,
      ),
    ),
  };
}

let nativeSchemas = 0;
let schemas = 0;
let taken = 0;
let records = 0;

maybe('the native Avro reader', () => {
  test('takes exactly the records the compiled reader takes and writes the same values, over generated schemas and datums', () => {
    fc.assert(
      fc.property(
        fc.integer(),
        fc.boolean(),
        fc.array(fc.tuple(fc.nat(), fc.constantFrom('keep', 'keep', 'keep', 'flip', 'cut', 'pad')), {
          minLength: 1,
          maxLength: 40,
        }),
        (seed, oneBuffer, plan) => {
          const r = new Random(seed);
          const schema = recordOf(r, 0);
          const reader = compiledOf(schema);
          schemas += 1;
          if (!reader?.native) return;
          nativeSchemas += 1;
          const values = plan.map(([n, mutation]) => {
            const bytes: number[] = [];
            datum(r, schema, bytes);
            if (mutation === 'flip' && bytes.length > 0) bytes[n % bytes.length] = r.int(256);
            if (mutation === 'cut' && bytes.length > 0) bytes.length = n % bytes.length;
            if (mutation === 'pad') bytes.push(r.int(256));
            return framed(1, bytes);
          });
          // A staging worker's values are views into one buffer; others are copied together.
          let views = values;
          if (oneBuffer) {
            const whole = Buffer.concat([Buffer.from([7]), ...values]);
            let at = 1;
            views = values.map((v) => {
              const view = whole.subarray(at, at + v.byteLength);
              at += v.byteLength;
              return view;
            });
          }
          const messages = views.map((v, offset) => msg(offset, v));
          const types = reader.fields.map(({ field }) => codecOf(field, 'ms').arrowType());
          const native = NativeAvroColumns.for(reader.native, types);
          expect(native).toBeDefined();
          const decoded = native!.decode(messages);
          const expected = compiledRead(reader, messages);
          expect([...decoded.rejected]).toEqual(expected.rejected);
          expect(rowsOf(batchOf(reader, decoded.children, decoded.rows))).toEqual(expected.rows);
          records += messages.length;
          taken += decoded.rows;
        },
      ),
      { numRuns: 400, seed: 20261207 },
    );
    // Worth something only if many schemas had a native reading and many records were read there.
    expect(nativeSchemas / schemas).toBeGreaterThan(0.2);
    expect(taken / records).toBeGreaterThan(0.1);
  });

  test('declines a column whose type is not the one its op writes', () => {
    const reader = compiledOf(LOG_V1)!;
    const types = reader.fields.map(({ field }) => codecOf(field, 'ms').arrowType());
    expect(NativeAvroColumns.for(reader.native!, types)).toBeDefined();
    // `level` (a string) given an int column: the decoder keeps the compiled reader.
    expect(NativeAvroColumns.for(reader.native!, [types[0]!, types[5]!, ...types.slice(2)])).toBeUndefined();
    expect(NativeAvroColumns.for(reader.native!, types.slice(1))).toBeUndefined();
  });
});

maybe('the record decoder with the native Avro reader', () => {
  const v1 = avro.Type.forSchema(LOG_V1 as avro.Schema);
  const v2 = avro.Type.forSchema(LOG_V2 as avro.Schema);
  const log = (i: number) => ({
    ts: 1_764_676_800_000 + i,
    level: i % 7 === 0 ? 'ERROR' : 'INFO',
    service: `svc-${i % 5}`,
    host: 'h-1',
    message: `request ${i} done ✓`,
    status: 200 + (i % 3),
    latency_ms: i / 3,
    trace_id: `t${i}`,
    attrs: { region: 'eu', attempt: i % 4, seq: i * 2 ** 40 },
  });
  const value = (type: avro.Type, id: number, record: object) =>
    Uint8Array.from([0, 0, 0, 0, id, ...type.toBuffer(record)]);
  const writers = [
    { id: 1, schemaType: 'AVRO', schema: JSON.stringify(LOG_V1) },
    { id: 2, schemaType: 'AVRO', schema: JSON.stringify(LOG_V2) },
  ];

  afterEach(() => jest.restoreAllMocks());

  test('reads a batch of one admitted writer whole, with the rows and dead letters of the reference', () => {
    const decode = jest.spyOn(NativeAvroColumns.prototype, 'decode');
    const first = Array.from({ length: 5 }, (_, i) => msg(i, value(v1, 1, log(i))));
    const corrupt = value(v1, 1, log(99)).slice(0, 20);
    const second = [
      ...Array.from({ length: 50 }, (_, i) => msg(5 + i, value(v1, 1, log(5 + i)))),
      msg(55, null), // a tombstone: a dead letter here
      msg(56, corrupt), // cut short: the reference's dead letter
      msg(57, value(v1, 1, log(57))),
    ];
    const { compiled, reference } = decodeBoth('avro', [first, second], writers);
    expect(compiled).toEqual(reference);
    expect(compiled![1]!.rows).toHaveLength(51);
    expect(compiled![1]!.deadLetters.map((d) => d.reason)).toEqual(['tombstone', 'undecodable-payload']);
    // The first batch admits the writer (one record at a time); the second is read natively.
    expect(decode).toHaveBeenCalledTimes(1);
  });

  test('leaves a batch of two writers, or of a writer not yet admitted, to the compiled reader', () => {
    const decode = jest.spyOn(NativeAvroColumns.prototype, 'decode');
    const mixed = [
      msg(0, value(v1, 1, log(0))),
      msg(1, value(v2, 2, { ...log(1), release: 'r7' })),
      msg(2, value(v1, 1, log(2))),
    ];
    const secondWriter = [msg(3, value(v2, 2, { ...log(3), release: null }))];
    for (const batches of [[secondWriter], [mixed, mixed]]) {
      const { compiled, reference } = decodeBoth('avro', batches, writers);
      expect(compiled).toEqual(reference);
    }
    expect(decode).not.toHaveBeenCalled();
    // Both writers admitted by the mixed batch, a batch of v2 alone is read natively, `release` its own column.
    const { compiled, reference } = decodeBoth('avro', [mixed, secondWriter], writers);
    expect(compiled).toEqual(reference);
    expect(compiled![1]!.schema).toContain('release: Utf8 true');
    expect(decode).toHaveBeenCalledTimes(1);
  });
});
