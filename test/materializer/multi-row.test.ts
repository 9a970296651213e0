/**
 * Regression: a transform that returns several rows per record
 * gives them one `_offset` (and `_row` 0..n-1). Staging used to demand strictly
 * increasing offsets and failed the push (OffsetOrderError, fatal: a crash loop on
 * the same batch). These tests stage such records end to end and publish them into a
 * real Lance table: every (_topic, _partition, _offset, _row) exactly once.
 */
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { recordOffset } from '../../src/common/offsets';
import { RecordDecoder, type DecoderOptions, type RawMessage } from '../../src/decode/record-decoder';
import { NO_FAULTS } from '../../src/faults/faults';
import { shareFaults } from '../../src/faults/thread-faults';
import { ledger } from '../../src/materializer/ledger';
import { DuplicatedRowsError } from '../../src/materializer/publication-errors';
import { intervalsOf } from '../../src/materializer/preparation';
import { readSealedPart } from '../../src/staging';
import {
  TABLE,
  TOPIC,
  capturingLogger,
  openFixtureStaging,
  openMaterializer,
  ownershipOf,
  sealedPartCount,
} from '../support/materializer-fixture';
import { partFiles, tempDir } from '../support/rows';

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);
const chainA = [{ owner: 'A', epoch: 1, start: 0 }];
const enc = new TextEncoder();

/** Record `o` yields `o % 4` rows (none for every fourth record: filtered out). */
const rowsOf = (offset: number) => offset % 4;

const multiRow: DecoderOptions = {
  format: 'json',
  fields: [{ name: 'item', type: 'string', nullable: false }],
  transform: (r) => {
    const v = r.value as { n: number };
    return Array.from({ length: rowsOf(v.n) }, (_, i) => ({ item: `${r.partition}/${v.n}/${i}` }));
  },
  eventTimeField: undefined,
  epochUnit: 'ms',
  maxInferredColumns: 256,
  includeKey: false,
  maxRecordBytes: 1024,
  tombstones: 'dead-letter',
};

const message = (offset: number): RawMessage => ({
  offsetNumber: offset,
  timestampNumber: NOW + offset,
  key: null,
  value: enc.encode(JSON.stringify({ n: offset })),
});

interface LanceQuad {
  readonly partition: number;
  readonly offset: number;
  readonly row: number;
  readonly item: string;
}

async function readQuads(lanceDir: string): Promise<LanceQuad[]> {
  const db = await lancedb.connect(lanceDir);
  const t = await db.openTable(TABLE);
  const rows = (await t.query().select(['_topic', '_partition', '_offset', '_row', 'item']).toArray()) as {
    _topic: string;
    _partition: number;
    _offset: bigint;
    _row: number;
    item: string;
  }[];
  t.close();
  db.close();
  for (const r of rows) expect(r._topic).toBe(TOPIC);
  return rows.map((r) => ({ partition: r._partition, offset: Number(r._offset), row: r._row, item: r.item }));
}

/** Every row of records [0, below(p)) of each partition exactly once, with its own payload. */
function expectEveryRowOnce(quads: readonly LanceQuad[], partitions: number, below: (p: number) => number) {
  const seen = new Set<string>();
  for (const q of quads) {
    const key = `${q.partition}/${q.offset}/${q.row}`;
    expect(seen.has(key)).toBe(false);
    seen.add(key);
    expect(q.item).toBe(key);
    expect(q.offset).toBeLessThan(below(q.partition));
    expect(q.row).toBeLessThan(rowsOf(q.offset));
  }
  let expected = 0;
  for (let p = 0; p < partitions; p++) for (let o = 0; o < below(p); o++) expected += rowsOf(o);
  expect(seen.size).toBe(expected);
}

let dir: string;
let tableDir: string;
let lanceDir: string;
beforeEach(async () => {
  dir = await tempDir('kl-multirow');
  tableDir = path.join(dir, 'staging', TABLE);
  lanceDir = path.join(dir, 'lance');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

/** Stages records [0, records) of each partition through the multi-row decoder, `perBatch` records a push, sealing every `perPart`. */
async function stageMultiRow(partitions: number, records: number, perBatch: number, perPart: number) {
  const staging = await openFixtureStaging(tableDir);
  const decoder = new RecordDecoder(multiRow, () => NOW);
  let staged = 0;
  for (let start = 0; start < records; start += perBatch) {
    const end = Math.min(records, start + perBatch);
    for (let p = 0; p < partitions; p++) {
      const messages = Array.from({ length: end - start }, (_, i) => message(start + i));
      const decoded = decoder.decode(TOPIC, p, messages);
      staged += staging.push({
        topic: TOPIC,
        partition: p,
        batch: decoded.batch,
        minute: decoded.minute,
        handledThrough: recordOffset(end - 1),
      }).staged;
    }
    if (end % perPart === 0) await staging.flush({ force: true });
  }
  await staging.close();
  return staged;
}

describe.each(['buffered', 'streamed'] as const)('multi-row transform (%s)', (mode) => {
  test('multi-row records are staged and published: every (_topic, _partition, _offset, _row) once in Lance', async () => {
    const staged = await stageMultiRow(2, 600, 50, 200);
    // Sealed parts count rows, not offsets.
    let partRows = 0;
    for (const name of await partFiles(tableDir, 'sealed')) {
      const { part } = await readSealedPart(path.join(tableDir, name));
      expect(part.rows).toBe(part.ranges.reduce((n, r) => n + r.rows, 0));
      partRows += part.rows;
    }
    expect(partRows).toBe(staged);

    const m = await openMaterializer(tableDir, lanceDir, { mode, maxPublicationBytes: 16 * 1024 });
    m.setOwnership(ownershipOf(2, chainA, 600));
    const results = await m.runOnce();
    expect(results.length).toBeGreaterThan(1);
    expect(results.reduce((n, r) => n + r.rows, 0)).toBe(staged);
    expectEveryRowOnce(await readQuads(lanceDir), 2, () => 600);
    expect(await sealedPartCount(tableDir)).toBe(0);
    m.close();
  });
});

test('multi-row records: a ceiling cut inside a part keeps whole records and counts their rows', async () => {
  await stageMultiRow(1, 400, 40, 400);
  const m = await openMaterializer(tableDir, lanceDir);
  // A's epoch ended at 217 (B re-consumed from there): a cut in the middle of the part.
  const ownership = ownershipOf(1, chainA, 400);
  ownership.set(ownership.keys().next().value!, {
    chain: [...chainA, { owner: 'B', epoch: 1, start: 217 }],
    committed: 1_000,
  });
  m.setOwnership(ownership);
  await m.runOnce();
  expectEveryRowOnce(await readQuads(lanceDir), 1, () => 217);
  m.close();
});

test('a writing publication of multi-row records found whole in Lance is resolved as published (rows counted, not offsets)', async () => {
  await stageMultiRow(1, 300, 30, 300);
  const [name] = await partFiles(tableDir, 'sealed');
  const file = path.join(tableDir, name!);
  const { part, batches } = await readSealedPart(file);
  const m = await openMaterializer(tableDir, lanceDir);
  m.setOwnership(ownershipOf(1, chainA, 300));
  await m.runOnce();
  m.close();
  // The ledger as a crash right after the add leaves it: plan + writing, no published.
  await ledger.writePlan(tableDir, {
    id: 'P-multi',
    table: TABLE,
    schemaKey: part.schemaKey,
    createdAt: 0,
    parts: [],
    rows: part.rows,
    bytes: 0,
  });
  await ledger.markWriting(tableDir, { id: 'P-multi', rows: part.rows, intervals: intervalsOf(batches) });
  const again = await openMaterializer(tableDir, lanceDir);
  await again.resume();
  expect(await fsp.readdir(path.join(tableDir, 'plans'))).toEqual([]);
  expectEveryRowOnce(await readQuads(lanceDir), 1, () => 300);
  again.close();
});

/**
 * 'published' commit mode: an owner publishes records and dies before committing them;
 * the next owner consumes them again from Kafka, after a deploy whose transform emits
 * fewer rows per record. Its insert-if-absent publication finds the earlier rows of the
 * same records (more than it holds): the table explains that (every record present, each
 * (_topic, _partition, _offset, _row) once), so the publication is done, not a stop.
 */
describe('insert-if-absent over records an earlier transform published', () => {
  const emitting = (rows: (offset: number) => number): DecoderOptions => ({
    ...multiRow,
    transform: (r) => {
      const v = r.value as { n: number };
      return Array.from({ length: rows(v.n) }, (_, i) => ({ item: `${r.partition}/${v.n}/${i}` }));
    },
  });
  const oldTransform = emitting(() => 3);
  const newTransform = emitting(() => 1);
  const RECORDS = 300;
  const chainB = [...chainA, { owner: 'B', epoch: 2, start: 0 }];

  async function stageWith(dir: string, decoderOptions: DecoderOptions, owner: string, epoch: number) {
    const staging = await openFixtureStaging(dir, { owner, epoch });
    const decoder = new RecordDecoder(decoderOptions, () => NOW);
    const decoded = decoder.decode(
      TOPIC,
      0,
      Array.from({ length: RECORDS }, (_, o) => message(o)),
    );
    staging.push({
      topic: TOPIC,
      partition: 0,
      batch: decoded.batch,
      minute: decoded.minute,
      handledThrough: recordOffset(RECORDS - 1),
    });
    await staging.flush({ force: true });
    await staging.close();
  }

  /** Owner A published records [0, RECORDS) with three rows each (and committed none). */
  async function publishedByOldOwner(): Promise<void> {
    const dirA = path.join(dir, 'a', TABLE);
    await stageWith(dirA, oldTransform, 'A', 1);
    const a = await openMaterializer(dirA, lanceDir, { commitAfter: 'published', owner: 'A' });
    a.setOwnership(ownershipOf(1, chainA, 0));
    await a.runOnce();
    a.close();
    expect((await readQuads(lanceDir)).length).toBe(3 * RECORDS);
  }

  function expectOldRowsOnce(quads: readonly LanceQuad[]): void {
    const keys = new Set(quads.map((q) => `${q.offset}/${q.row}`));
    expect(keys.size).toBe(quads.length);
    expect(quads.length).toBe(3 * RECORDS);
    for (let o = 0; o < RECORDS; o++) for (let r = 0; r < 3; r++) expect(keys.has(`${o}/${r}`)).toBe(true);
  }

  test('the next owner re-publishing them with one row per record finds three and is done', async () => {
    await publishedByOldOwner();
    const dirB = path.join(dir, 'b', TABLE);
    await stageWith(dirB, newTransform, 'B', 2);
    const { logger, lines } = capturingLogger();
    const b = await openMaterializer(dirB, lanceDir, { commitAfter: 'published', owner: 'B', logger });
    b.setOwnership(ownershipOf(1, chainB, 0));
    const results = await b.runOnce();
    b.close();
    expect(results.reduce((n, r) => n + r.rows, 0)).toBe(RECORDS);
    expect(lines.filter((l) => l.event === 'publication.explained')).toEqual([
      expect.objectContaining({ rows: RECORDS, found: 3 * RECORDS, extraRows: 2 * RECORDS }),
    ]);
    expect(await sealedPartCount(dirB)).toBe(0);
    expect(await fsp.readdir(path.join(dirB, 'plans'))).toEqual([]);
    expectOldRowsOnce(await readQuads(lanceDir));
  });

  test('recovering its writing publication after a restart finds three rows per record and is done', async () => {
    await publishedByOldOwner();
    const dirB = path.join(dir, 'b', TABLE);
    await stageWith(dirB, newTransform, 'B', 2);
    // The merge fails once (a full disk, injected) after `writing` is durable: the
    // publication is left `writing`, as a crash before the merge leaves it.
    const flag = path.join(dir, 'disk-full');
    await fsp.writeFile(flag, '');
    shareFaults({ ...NO_FAULTS, diskFullFlags: { lance: flag } });
    try {
      const first = await openMaterializer(dirB, lanceDir, { commitAfter: 'published', owner: 'B' });
      first.setOwnership(ownershipOf(1, chainB, 0));
      expect(await first.runOnce()).toEqual([]);
      first.close();
    } finally {
      shareFaults(NO_FAULTS);
    }
    expect((await ledger.list(dirB)).some((e) => e.writing !== undefined)).toBe(true);

    const restarted = await openMaterializer(dirB, lanceDir, { commitAfter: 'published', owner: 'B' });
    restarted.setOwnership(ownershipOf(1, chainB, 0));
    await restarted.resume();
    while ((await sealedPartCount(dirB)) > 0) await restarted.runOnce();
    restarted.close();
    expect(await fsp.readdir(path.join(dirB, 'plans'))).toEqual([]);
    expectOldRowsOnce(await readQuads(lanceDir));
  });

  test('a row key the table really holds twice still stops the table', async () => {
    await publishedByOldOwner();
    // The same rows appended once more (as a plain add racing a merge leaves them).
    const db = await lancedb.connect(lanceDir);
    const t = await db.openTable(TABLE);
    await t.add(await t.query().where('_offset < 10').toArrow());
    t.close();
    db.close();
    const dirB = path.join(dir, 'b', TABLE);
    await stageWith(dirB, newTransform, 'B', 2);
    const b = await openMaterializer(dirB, lanceDir, { commitAfter: 'published', owner: 'B' });
    b.setOwnership(ownershipOf(1, chainB, 0));
    await expect(b.runOnce()).rejects.toThrow(DuplicatedRowsError);
    b.close();
    expect(await sealedPartCount(dirB)).toBe(1);
  });
});
