import type { RecordBatch } from 'apache-arrow';
import type { PartOffsetRange } from '../staging/sealed-part';
import { stagedColumns } from '../staging/system-columns';
import type { KeepRange } from './ledger';

/**
 * The one definition of which rows a plan keeps: offsets in [from, below) of the
 * keep range of their (topic, partition); a partition without one keeps nothing.
 * Planning (count without reading), counting (reading a straddling part) and the
 * preparation filter all go through `keptSpan`: if they disagreed, a publication's
 * descriptors would not match its plan and it would never commit.
 */
export function keptSpan(
  keep: readonly KeepRange[],
  topic: string,
  partition: number,
  first: number,
  last: number,
): 'all' | 'none' | 'some' {
  const k = keep.find((x) => x.partition === partition && x.topic === topic);
  if (!k || last < k.from || first >= k.below) return 'none';
  return first >= k.from && last < k.below ? 'all' : 'some';
}

/** The part of the offsets [first, last] of one partition inside its keep range, if any. */
export function keptBounds(
  keep: readonly KeepRange[],
  topic: string,
  partition: number,
  first: number,
  last: number,
): { first: number; last: number } | undefined {
  if (keptSpan(keep, topic, partition, first, last) === 'none') return undefined;
  const k = keep.find((x) => x.partition === partition && x.topic === topic)!;
  return { first: Math.max(first, k.from), last: Math.min(last, k.below - 1) };
}

/** Rows kept by ranges that lie wholly inside their keep range; a straddling range needs a read (countKeptRows). */
export function keptRowsOfRanges(ranges: readonly PartOffsetRange[], keep: readonly KeepRange[]): number {
  let kept = 0;
  for (const r of ranges) {
    if (keptSpan(keep, r.topic, r.partition, r.firstOffset, r.lastOffset) === 'all') kept += r.rows;
  }
  return kept;
}

/** [start, end) row indices of the runs of consecutive kept rows of a staged batch. */
export function keptRuns(batch: RecordBatch, keep: readonly KeepRange[]): [number, number][] {
  const reader = stagedColumns(batch);
  const runs: [number, number][] = [];
  let runStart = -1;
  for (let i = 0; i <= batch.numRows; i++) {
    let kept = false;
    if (i < batch.numRows) {
      const offset = reader.offset(i);
      kept = keptSpan(keep, reader.topic(i), reader.partition(i), offset, offset) === 'all';
    }
    if (kept && runStart < 0) runStart = i;
    if (!kept && runStart >= 0) {
      runs.push([runStart, i]);
      runStart = -1;
    }
  }
  return runs;
}

export function countKeptRows(batches: readonly RecordBatch[], keep: readonly KeepRange[]): number {
  let kept = 0;
  for (const b of batches) for (const [start, end] of keptRuns(b, keep)) kept += end - start;
  return kept;
}
