import fc from 'fast-check';
import { intervalsOf } from '../../src/materializer/preparation';
import { systemColumnReader } from '../../src/staging/system-columns';
import { rowsFor } from '../support/rows';

/** The definition: sort each partition's offsets, cut where they jump by more than 1. */
function naiveIntervals(rows: readonly { topic: string; partition: number; offset: number }[]) {
  const by = new Map<string, { topic: string; partition: number; offsets: number[] }>();
  for (const r of rows) {
    const key = `${r.topic}/${r.partition}`;
    const e = by.get(key) ?? { topic: r.topic, partition: r.partition, offsets: [] };
    e.offsets.push(r.offset);
    by.set(key, e);
  }
  const out: { topic: string; partition: number; first: number; last: number }[] = [];
  for (const { topic, partition, offsets } of by.values()) {
    offsets.sort((a, b) => a - b);
    let first = offsets[0]!;
    let last = first;
    for (const o of offsets.slice(1)) {
      if (o <= last + 1) last = o;
      else {
        out.push({ topic, partition, first, last });
        first = last = o;
      }
    }
    out.push({ topic, partition, first, last });
  }
  return out;
}

const byKey = (a: { topic: string; partition: number; first: number }, b: typeof a) =>
  a.topic.localeCompare(b.topic) || a.partition - b.partition || a.first - b.first;

describe('system columns read from their buffers', () => {
  test('the reader sees what apache-arrow get() sees, in sliced batches too', () => {
    const batch = rowsFor('tópic-ü', 3, [0, 5, 2 ** 40 + 7, 2 ** 53 - 1, 9]);
    for (const b of [batch, batch.slice(1, 4), batch.slice(3)]) {
      const reader = systemColumnReader(b)!;
      for (let i = 0; i < b.numRows; i++) {
        expect(reader.topic(i)).toBe(b.getChild('_topic')!.get(i));
        expect(reader.partition(i)).toBe(b.getChild('_partition')!.get(i));
        expect(reader.offset(i)).toBe(Number(b.getChild('_offset')!.get(i) as bigint));
      }
    }
  });

  test('intervalsOf equals the sort-and-cut definition for batches in any order', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            topic: fc.constantFrom('a', 'b'),
            partition: fc.integer({ min: 0, max: 2 }),
            offsets: fc.array(fc.integer({ min: 0, max: 40 }), { minLength: 1, maxLength: 12 }),
          }),
          { minLength: 1, maxLength: 8 },
        ),
        (batches) => {
          const rows = batches.flatMap((b) => b.offsets.map((offset) => ({ ...b, offset })));
          const got = intervalsOf(batches.map((b) => rowsFor(b.topic, b.partition, b.offsets)));
          expect([...got].sort(byKey)).toEqual(naiveIntervals(rows).sort(byKey));
        },
      ),
    );
  });
});
