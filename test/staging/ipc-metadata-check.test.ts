import {
  Binary,
  Bool,
  DateDay,
  Decimal,
  Dictionary,
  Duration,
  Field,
  FixedSizeBinary,
  FixedSizeList,
  Float16,
  Float32,
  Float64,
  Int16,
  Int32,
  Int8,
  IntervalDayTime,
  LargeUtf8,
  List,
  Map_,
  Message,
  Null,
  Schema,
  Struct,
  TimeMillisecond,
  TimestampMicrosecond,
  Uint64,
  Union,
  UnionMode,
  Utf8,
  makeData,
  vectorFromArray,
  RecordBatch,
  type DataType,
} from 'apache-arrow';
import { metadataProblem } from '../../src/staging/ipc-metadata-check';
import { END_OF_STREAM, encodeBatches, encodeSchema, scanStream } from '../../src/staging/ipc-stream';

/** The metadata (flatbuffer) of each message of a stream. */
function metadataOf(stream: Uint8Array): Uint8Array[] {
  const view = Buffer.from(stream.buffer, stream.byteOffset, stream.byteLength);
  const out: Uint8Array[] = [];
  for (let pos = 0; pos + 8 <= view.byteLength;) {
    const length = view.readInt32LE(pos + 4);
    if (length === 0) break;
    const metadata = view.subarray(pos + 8, pos + 8 + length);
    out.push(metadata);
    pos += 8 + length + Number(Message.decode(metadata).bodyLength);
  }
  return out;
}

const withMetadata = (name: string, type: DataType, nullable = true) =>
  new Field(name, type, nullable, new Map([[`${name}.origin`, 'test']]));

/** A field of every type family apache-arrow writes, nested ones inside each other, with metadata. */
const everyType = new Schema(
  [
    withMetadata('null', new Null()),
    withMetadata('i8', new Int8(), false),
    withMetadata('u64', new Uint64()),
    withMetadata('f16', new Float16()),
    withMetadata('f32', new Float32()),
    withMetadata('decimal', new Decimal(4, 18, 128)),
    withMetadata('bool', new Bool()),
    withMetadata('utf8', new Utf8()),
    withMetadata('large_utf8', new LargeUtf8()),
    withMetadata('binary', new Binary()),
    withMetadata('fixed_binary', new FixedSizeBinary(16)),
    withMetadata('date', new DateDay()),
    withMetadata('time', new TimeMillisecond()),
    withMetadata('ts_zoned', new TimestampMicrosecond('Europe/Amsterdam')),
    withMetadata('interval', new IntervalDayTime()),
    withMetadata('duration', new Duration(1)),
    withMetadata('vector', new FixedSizeList(8, new Field('item', new Float32(), true))),
    withMetadata('tags', new List(new Field('item', new Utf8(), true))),
    withMetadata(
      'nested',
      new Struct([
        withMetadata('inner', new Struct([withMetadata('deep', new List(new Field('x', new Int16())))])),
        withMetadata('at', new TimestampMicrosecond('UTC')),
      ]),
    ),
    withMetadata(
      'attrs',
      new Map_<Utf8, Float64>(
        new Field(
          'entries',
          new Struct<{ key: Utf8; value: Float64 }>([
            new Field('key', new Utf8(), false),
            new Field('value', new Float64(), true),
          ]),
          false,
        ),
      ),
    ),
    withMetadata('category', new Dictionary(new Utf8(), new Int32(), 7)),
    withMetadata(
      'either',
      new Union(UnionMode.Dense, [0, 5], [new Field('n', new Int32()), new Field('s', new Utf8())]),
    ),
  ],
  new Map([
    ['kafka-lance.epoch', '{"owner":"a","epoch":1}'],
    ['note', 'x'.repeat(300)],
  ]),
);

describe('the bounds check of IPC message metadata', () => {
  it('passes the schema of every type family, nested and with metadata, as apache-arrow writes it', () => {
    const [schemaMetadata] = metadataOf(encodeSchema(everyType));
    expect(metadataProblem(schemaMetadata!)).toBeUndefined();
  });

  it('passes record batch messages, and a stream of them scans whole, with no damage', () => {
    const rows = 50;
    const schema = new Schema([
      new Field('id', new Int32(), false),
      new Field('name', new Utf8(), true),
      new Field('vector', new FixedSizeList(4, new Field('item', new Float32(), true)), true),
    ]);
    const values = vectorFromArray(Float32Array.from({ length: rows * 4 }, (_, i) => i / 3));
    const vector = makeData({
      type: schema.fields[2]!.type as FixedSizeList<Float32>,
      length: rows,
      nullCount: 0,
      child: values.data[0]!,
    });
    const batch = new RecordBatch(
      schema,
      makeData({
        type: new Struct(schema.fields),
        length: rows,
        nullCount: 0,
        children: [
          vectorFromArray(Int32Array.from({ length: rows }, (_, i) => i)).data[0]!,
          vectorFromArray(
            Array.from({ length: rows }, (_, i) => (i % 3 ? `row ${i}` : null)),
            new Utf8(),
          ).data[0]!,
          vector,
        ],
      }),
    );
    const stream = Buffer.concat([
      encodeSchema(schema),
      encodeBatches(schema, [batch, batch.slice(7, 31)]),
      END_OF_STREAM,
    ]);
    for (const metadata of metadataOf(stream)) expect(metadataProblem(metadata)).toBeUndefined();
    expect(scanStream(stream)).toEqual({
      validLength: stream.byteLength,
      ended: true,
      hasSchema: true,
      batchCount: 2,
      trailingBytes: 0,
    });
  });

  it('refuses every single-bit flip in the schema message that would make a vector or string reach past its bytes, and each refusal names it', () => {
    const [metadata] = metadataOf(encodeSchema(everyType));
    const reasons = new Set<string>();
    let refused = 0;
    for (let at = 0; at < metadata!.byteLength; at++)
      for (let bit = 0; bit < 8; bit++) {
        const damaged = Uint8Array.from(metadata!);
        damaged[at]! ^= 1 << bit;
        const problem = metadataProblem(damaged);
        if (problem === undefined) continue;
        refused += 1;
        reasons.add(problem.replace(/\d+/g, 'N'));
      }
    // A flip of a high bit of any length or offset lands far outside the message.
    expect(refused).toBeGreaterThan(metadata!.byteLength / 4);
    expect([...reasons].some((r) => r.includes('vector of N elements'))).toBe(true);
    expect([...reasons].every((r) => r.startsWith('message metadata: '))).toBe(true);
  });

  it('passes a schema nested 300 structs deep: nesting has no limit of its own', () => {
    let type: DataType = new Int32();
    for (let level = 0; level < 300; level++) type = new Struct([new Field(`l${level}`, type, true)]);
    const [metadata] = metadataOf(encodeSchema(new Schema([new Field('deep', type, true)])));
    expect(metadataProblem(metadata!)).toBeUndefined();
  });

  it('refuses metadata too short for its root offset, and offsets that point back into a loop', () => {
    expect(metadataProblem(Uint8Array.of(1, 0))).toMatch(/shorter than a root offset/);
    // A root table whose vtable offset points at itself: a vtable of 0 bytes.
    const looped = new Uint8Array(16);
    new DataView(looped.buffer).setUint32(0, 4, true);
    expect(metadataProblem(looped)).toMatch(/vtable of 0 bytes/);
  });
});
