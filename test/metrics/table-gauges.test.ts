import type { IndexReport } from '../../src/lance/index-keeper';
import { alertsOn } from '../../src/materializer/table-stall';
import { TableGauges } from '../../src/metrics/table-gauges';

const labelOf = (t: string) => (t === 'named' ? 'named' : '_other');

function report(index: string, unindexedRows: number, seconds?: number): IndexReport {
  return {
    index,
    column: 'v',
    type: 'btree',
    state: 'updated',
    indexedRows: 0,
    unindexedRows,
    ...(seconds !== undefined ? { seconds } : {}),
  } as IndexReport;
}

describe('per-label gauges of many tables', () => {
  test('under _other the gauges combine every table (parts summed, stalled if any), not the last one reported', () => {
    const g = new TableGauges();
    g.set('named', { sealedParts: 1, stalled: 0 });
    g.set('x', { sealedParts: 4, stalled: 1 });
    g.set('y', { sealedParts: 3, stalled: 0 }); // reported last: must not hide x
    expect(Object.fromEntries(g.perLabel(labelOf))).toEqual({
      named: { sealedParts: 1, stalled: 0 },
      _other: { sealedParts: 7, stalled: 1 },
    });
  });

  test('under _other index gauges sum unindexed rows and keep the longest update', () => {
    const g = new TableGauges();
    g.setIndexes('x', [report('idx', 100, 9)]);
    g.setIndexes('y', [report('idx', 50, 2)]);
    g.setIndexes('named', [report('idx', 7, 1)]);
    const per = g.indexesPerLabel(labelOf);
    expect(per.get('_other')?.get('idx')).toEqual({ unindexedRows: 150, seconds: 9 });
    expect(per.get('named')?.get('idx')).toEqual({ unindexedRows: 7, seconds: 1 });
    // A later report of one table replaces its own value only.
    g.setIndexes('x', [report('idx', 0)]);
    expect(g.indexesPerLabel(labelOf).get('_other')?.get('idx')).toEqual({ unindexedRows: 50, seconds: 2 });
  });

  test('a plan waiting for its retry is not a stall to alert on; failing, refused and damaged are', () => {
    expect(alertsOn('retrying')).toBe(false);
    expect(alertsOn(undefined)).toBe(false);
    for (const r of ['failing', 'refused', 'damaged'] as const) expect(alertsOn(r)).toBe(true);
  });
});
