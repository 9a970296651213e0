/** Regression tests for issue 9 ("Hardening"), staging side. */
import { promises as fsp } from 'node:fs';
import { OffsetOrderError } from '../../src/common/errors';
import { recordOffset, tpKey } from '../../src/common/offsets';
import { minuteKeyOf } from '../../src/staging';
import { MINUTE, openStaging, partFiles, readSealedRows, rowsFor, tempDir } from '../support/rows';

const T = 'orders';

let dir: string;
beforeEach(async () => {
  dir = await tempDir('kl-hardening');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

describe('item 6: multi-row records share an offset', () => {
  test('staging accepts the rows of one record (equal offsets) and still refuses offsets going backwards', async () => {
    const h = await openStaging(dir);
    // Records 0 and 1 made two and three rows, record 2 none, record 3 one.
    const result = h.staging.push({
      topic: T,
      partition: 0,
      batch: rowsFor(T, 0, [0, 0, 1, 1, 1, 3]),
      minute: MINUTE,
      handledThrough: recordOffset(3),
    });
    expect(result).toEqual({ staged: 6, skipped: 0 });
    expect(() =>
      h.staging.push({
        topic: T,
        partition: 1,
        batch: rowsFor(T, 1, [4, 4, 3]),
        minute: MINUTE,
        handledThrough: recordOffset(4),
      }),
    ).toThrow(OffsetOrderError);
    expect((await h.staging.sync()).get(tpKey(T, 0))).toBe(3);
    const { sealed } = await h.staging.close();
    expect(sealed).toHaveLength(1);
    expect(sealed[0]!.rows).toBe(6);
    expect(sealed[0]!.ranges).toEqual([{ topic: T, partition: 0, firstOffset: 0, lastOffset: 3, rows: 6 }]);
    expect((await readSealedRows(dir)).map((r) => r.offset)).toEqual([0, 0, 1, 1, 1, 3]);
  });

  test('a redelivered multi-row record is skipped whole', async () => {
    const h = await openStaging(dir);
    h.staging.push({
      topic: T,
      partition: 0,
      batch: rowsFor(T, 0, [0, 0, 1, 1]),
      minute: MINUTE,
      handledThrough: recordOffset(1),
    });
    const again = h.staging.push({
      topic: T,
      partition: 0,
      batch: rowsFor(T, 0, [1, 1, 2, 2]),
      minute: MINUTE,
      handledThrough: recordOffset(2),
    });
    expect(again).toEqual({ staged: 2, skipped: 2 });
    await h.staging.close();
    expect((await readSealedRows(dir)).map((r) => r.offset)).toEqual([0, 0, 1, 1, 2, 2]);
  });

  test("a record's rows stay in one part even when their event-time minutes differ", async () => {
    const h = await openStaging(dir);
    const m0 = minuteKeyOf(Date.UTC(2026, 10, 30, 11, 0));
    const m1 = minuteKeyOf(Date.UTC(2026, 10, 30, 11, 1));
    // Record 5's second row is in the next minute: it must not land in another part
    // (that part could go to another publication, whose offset runs would then count it).
    h.staging.push({
      topic: T,
      partition: 0,
      batch: rowsFor(T, 0, [5, 5, 6, 7]),
      minute: [m0, m1, m1, m0],
      handledThrough: recordOffset(7),
    });
    await h.staging.close();
    const byOffset = new Map<number, Set<string>>();
    for (const r of await readSealedRows(dir)) {
      const files = byOffset.get(r.offset) ?? new Set<string>();
      files.add(r.file);
      byOffset.set(r.offset, files);
    }
    expect([...byOffset.values()].every((files) => files.size === 1)).toBe(true);
    expect(await partFiles(dir, 'sealed')).toHaveLength(2); // m0 holds records 5 and 7
  });
});
