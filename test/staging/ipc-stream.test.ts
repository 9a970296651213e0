import { makeVector, Table, tableFromIPC, vectorFromArray, Utf8, type RecordBatch } from 'apache-arrow';
import {
  chunksAfter,
  encodeBatchChunks,
  encodeBatches,
  encodeSchema,
  END_OF_STREAM,
} from '../../src/staging/ipc-stream';

function join(chunks: readonly Uint8Array[]): Uint8Array {
  return Buffer.concat(chunks.map((c) => Buffer.from(c.buffer, c.byteOffset, c.byteLength)));
}

/** Batches with fixed-width, variable-width, nullable and sliced columns: every buffer kind a part holds. */
function sampleBatches(): { schema: RecordBatch['schema']; batches: RecordBatch[] } {
  const rows = 1_000;
  const table = new Table({
    id: makeVector(BigInt64Array.from({ length: rows }, (_, i) => BigInt(i))),
    score: makeVector(Float64Array.from({ length: rows }, (_, i) => i / 7)),
    name: vectorFromArray(
      Array.from({ length: rows }, (_, i) => (i % 5 === 0 ? null : `name-${i}-${'x'.repeat(i % 13)}`)),
      new Utf8(),
    ),
  });
  const [whole] = table.batches;
  // A slice starts its offsets and bitmaps mid-buffer: the writer re-bases them.
  return { schema: table.schema, batches: [whole!, whole!.slice(3, 517), whole!.slice(600)] };
}

describe('IPC stream chunks for a vectored write', () => {
  it('are, one after another, the bytes of the joined messages', () => {
    const { schema, batches } = sampleBatches();
    const chunks = encodeBatchChunks(schema, batches);
    expect(chunks.length).toBeGreaterThan(batches.length);
    expect(Buffer.from(join(chunks)).equals(Buffer.from(encodeBatches(schema, batches)))).toBe(true);
  });

  it('make a stream that reads back as the same rows', () => {
    const { schema, batches } = sampleBatches();
    const stream = join([encodeSchema(schema), ...encodeBatchChunks(schema, batches), END_OF_STREAM]);
    const read = tableFromIPC(stream);
    expect(read.numRows).toBe(batches.reduce((n, b) => n + b.numRows, 0));
    const names = batches.flatMap((b) => b.getChild('name')!.toArray() as (string | null)[]);
    expect(read.getChild('name')!.toArray()).toEqual(names);
    expect(read.getChild('id')!.get(1_000 + 513)).toBe(BigInt(516));
  });

  it('resume after any number of written bytes with exactly the rest', () => {
    const chunks = [Uint8Array.of(1, 2, 3), Uint8Array.of(), Uint8Array.of(4, 5), Uint8Array.of(6)];
    const all = [1, 2, 3, 4, 5, 6];
    for (let skip = 0; skip <= all.length; skip++) {
      expect([...join(chunksAfter(chunks, skip))]).toEqual(all.slice(skip));
    }
  });
});
