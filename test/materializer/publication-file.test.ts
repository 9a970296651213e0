/**
 * A publication's IPC file laid over its staged parts (src/materializer/publication-file.ts)
 * must hold exactly the rows the parts decode to, in plan order, for both readers that
 * see it: apache-arrow's and LanceDB's (arrow-rs, through the native add). Anything it
 * cannot lay out faithfully (a dictionary batch, no room for the footer) must be refused,
 * so that the publisher encodes the decoded rows instead.
 */
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import {
  Dictionary,
  Int32,
  Table as ArrowTable,
  Utf8,
  tableFromIPC,
  tableToIPC,
  vectorFromArray,
} from 'apache-arrow';
import { recordOffset } from '../../src/common/offsets';
import { appendArrowTable } from '../../src/lance/arrow-add';
import { Permits } from '../../src/materializer/permits';
import type { PlanPart } from '../../src/materializer/ledger';
import { preparePart, type PreparedPart } from '../../src/materializer/preparation';
import { publicationLayout, sealPublicationFile } from '../../src/materializer/publication-file';
import { SourceBuffers } from '../../src/materializer/source-buffers';
import type { SealedPart } from '../../src/staging/sealed-part';
import { MINUTE, openStaging, range, rowsFor, tempDir } from '../support/rows';

const T = 'orders';
const preparation = () => ({ fetch: new Permits('fetch', 2), decode: new Permits('decode', 2) });

const planPartOf = (part: SealedPart): PlanPart => ({
  path: part.path,
  bytes: part.bytes,
  checksum: part.checksum,
  epoch: part.epoch,
  rows: part.rows,
  keptRows: part.rows,
  ranges: part.ranges,
  keep: [],
});

/** Three sealed parts, each of three partitions written in three ticks (several batches). */
async function stagedParts(dir: string): Promise<SealedPart[]> {
  const h = await openStaging(dir);
  const sealed: SealedPart[] = [];
  for (let part = 0; part < 3; part++) {
    for (let tick = 0; tick < 3; tick++) {
      for (let p = 0; p < 3; p++) {
        const from = (part * 3 + tick) * 100 + p * 7;
        h.staging.push({
          topic: T,
          partition: p,
          batch: rowsFor(T, p, range(from, from + 40 + p)),
          minute: MINUTE,
          handledThrough: recordOffset(from + 39 + p),
        });
      }
      await h.staging.flush();
    }
    sealed.push(...(await h.staging.flush({ force: true })).sealed);
  }
  await h.staging.close();
  return sealed;
}

async function prepareInto(buffer: Buffer, parts: readonly PlanPart[]): Promise<PreparedPart[]> {
  const layout = publicationLayout(parts.map((p) => p.bytes));
  return Promise.all(
    parts.map((part, i) => {
      const slot = layout.slots[i]!;
      return preparePart(part, preparation(), buffer.subarray(slot.offset, slot.offset + slot.length));
    }),
  );
}

const decodedOf = (prepared: readonly PreparedPart[]) =>
  prepared.map((p) => ({ batches: p.batches.length, rows: p.descriptor.rows }));

const plainRows = (table: ArrowTable) => table.toArray().map((r: Record<string, unknown>) => ({ ...r }));

let dir: string;
beforeEach(async () => {
  dir = await tempDir('kl-publication-file');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

test('the parts read in place form an IPC file of exactly their rows, in plan order', async () => {
  const sealed = await stagedParts(dir);
  expect(sealed).toHaveLength(3);
  expect(sealed.every((s) => s.batches >= 3)).toBe(true);
  const parts = sealed.map(planPartOf);
  const layout = publicationLayout(parts.map((p) => p.bytes));
  const buffer = new SourceBuffers(2, 1 << 30).lease(layout.capacity);
  const prepared = await prepareInto(buffer, parts);
  expect(prepared.every((p) => p.inSlot)).toBe(true);

  const file = sealPublicationFile(buffer, layout, prepared[0]!.schema, decodedOf(prepared));
  expect(file).toBeDefined();
  const read = tableFromIPC(file!);
  const decoded = new ArrowTable(prepared.flatMap((p) => p.batches));
  expect(read.numRows).toBe(sealed.reduce((n, s) => n + s.rows, 0));
  expect(read.batches).toHaveLength(sealed.reduce((n, s) => n + s.batches, 0));
  expect(read.schema.metadata.size).toBe(0);
  expect(read.schema.fields.map((f) => `${f.name}:${String(f.type)}`)).toEqual(
    decoded.schema.fields.map((f) => `${f.name}:${String(f.type)}`),
  );
  expect(plainRows(read)).toEqual(plainRows(decoded));
});

test('LanceDB takes the file through its native add and holds what the public add of the decoded rows holds', async () => {
  const parts = (await stagedParts(dir)).map(planPartOf);
  const layout = publicationLayout(parts.map((p) => p.bytes));
  const buffer = new SourceBuffers(2, 1 << 30).lease(layout.capacity);
  const prepared = await prepareInto(buffer, parts);
  const file = sealPublicationFile(buffer, layout, prepared[0]!.schema, decodedOf(prepared))!;
  const decoded = new ArrowTable(prepared.flatMap((p) => p.batches));

  const db = await lancedb.connect(path.join(dir, 'lance'));
  const direct = await db.createEmptyTable('direct', decoded.schema);
  const reference = await db.createEmptyTable('reference', decoded.schema);
  await appendArrowTable(direct, file, true);
  await appendArrowTable(reference, decoded, false);
  const rowsOf = async (t: lancedb.Table) =>
    ((await t.query().toArray()) as { _partition: number; _offset: bigint; message: string }[])
      .map((r) => `${r._partition}/${r._offset}/${r.message}`)
      .sort();
  expect(await direct.countRows()).toBe(decoded.numRows);
  expect(await rowsOf(direct)).toEqual(await rowsOf(reference));
  // The file names its rows by offset: a footer pointing at the wrong message would
  // repeat or skip rows, which the sets above would show.
  expect(new Set(await rowsOf(direct)).size).toBe(decoded.numRows);
  // An IPC file goes only to the native add: the public one would take it for rows.
  await expect(appendArrowTable(reference, file, false)).rejects.toThrow(/native add/);
});

test('a part holding a dictionary batch, or a buffer with no room for the footer, is refused', async () => {
  const dictionary = new ArrowTable({
    d: vectorFromArray(['a', 'b', 'a'], new Dictionary(new Utf8(), new Int32())),
  });
  const stream = Buffer.from(tableToIPC(dictionary, 'stream'));
  const layout = publicationLayout([stream.byteLength]);
  const buffer = Buffer.alloc(layout.capacity);
  stream.copy(buffer, layout.slots[0]!.offset);
  expect(sealPublicationFile(buffer, layout, dictionary.schema, [{ batches: 1, rows: 3 }])).toBeUndefined();

  const parts = (await stagedParts(dir)).map(planPartOf);
  const fitted = publicationLayout(parts.map((p) => p.bytes));
  const exact = Buffer.alloc(fitted.slots.at(-1)!.offset + fitted.slots.at(-1)!.length);
  const prepared = await prepareInto(exact, parts);
  expect(sealPublicationFile(exact, fitted, prepared[0]!.schema, decodedOf(prepared))).toBeUndefined();
});

test('a file whose blocks are not the batches and rows the checks decoded is refused', async () => {
  const parts = (await stagedParts(dir)).map(planPartOf);
  const layout = publicationLayout(parts.map((p) => p.bytes));
  const buffer = Buffer.alloc(layout.capacity);
  const prepared = await prepareInto(buffer, parts);
  const decoded = decodedOf(prepared);
  const schema = prepared[0]!.schema;
  expect(sealPublicationFile(buffer, layout, schema, decoded)).toBeDefined();
  const oneRowMore = decoded.map((d, i) => (i === 1 ? { ...d, rows: d.rows + 1 } : d));
  expect(sealPublicationFile(buffer, layout, schema, oneRowMore)).toBeUndefined();
  const oneBatchFewer = decoded.map((d, i) => (i === 2 ? { ...d, batches: d.batches - 1 } : d));
  expect(sealPublicationFile(buffer, layout, schema, oneBatchFewer)).toBeUndefined();
  expect(sealPublicationFile(buffer, layout, schema, decoded.slice(1))).toBeUndefined();
});

test('a part whose file is not the size the plan gives is read into a buffer of its own', async () => {
  const [part] = (await stagedParts(dir)).map(planPartOf);
  const slot = Buffer.alloc(part!.bytes + 8);
  const prepared = await preparePart(part!, preparation(), slot);
  expect(prepared.inSlot).toBe(false);
  expect(prepared.descriptor.rows).toBe(part!.rows);
});

test('a reused buffer is the smallest free one that holds the request; at most `keep` are kept, none above `keepUpTo`', () => {
  const buffers = new SourceBuffers(2, 32 * 1024 * 1024);
  const large = buffers.lease(40 * 1024 * 1024);
  buffers.release(large);
  expect(buffers.lease(33 * 1024 * 1024)).not.toBe(large);
  const a = buffers.lease(3 * 1024 * 1024);
  const b = buffers.lease(10 * 1024 * 1024);
  expect(a.byteLength).toBe(3 * 1024 * 1024);
  buffers.release(a);
  buffers.release(b);
  expect(buffers.lease(2 * 1024 * 1024)).toBe(a);
  buffers.release(a);
  expect(buffers.lease(5 * 1024 * 1024)).toBe(b);
  // Nothing free holds 20 MiB: a new buffer, and the smaller free one is let go.
  const c = buffers.lease(20 * 1024 * 1024);
  expect(c).not.toBe(a);
  buffers.release(b);
  buffers.release(c);
  expect(buffers.lease(1)).toBe(b);
});
