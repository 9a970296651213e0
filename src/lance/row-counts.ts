import type * as lancedb from '@lancedb/lancedb';
import {
  OFFSET_COLUMN,
  PARTITION_COLUMN,
  ROW_COLUMN,
  TOPIC_COLUMN,
  TOPIC_ID_COLUMN,
} from '../staging/system-columns';

/**
 * Counting a table's rows by offset intervals: how a publication whose add's outcome
 * is unknown (a rejected add, an insert-if-absent, a `writing` record after a crash) is
 * resolved from the data itself, since LanceDB has no commit properties.
 */

export interface OffsetIntervalFilter {
  readonly topic: string;
  readonly partition: number;
  readonly first: number;
  readonly last: number;
  /**
   * The incarnation of the topic (`_topic_id`): only its rows count. Undefined for rows
   * staged before the column existed (a ledger record or part of an older version):
   * then every row in the interval counts, as before.
   */
  readonly topicId?: string;
}

/**
 * OR-filters (64 intervals each) selecting the rows of the intervals, of each interval's
 * incarnation only: the rows of a deleted incarnation of the topic share its (topic,
 * partition, offset) and must not count (they would make a publication look published,
 * or more than published). Rows with a null `_topic_id` were written before topic ids
 * (by an earlier version, or added with the column to an older table): they count as
 * the interval's incarnation, so that a replica upgraded mid-stream finds its
 * predecessor's rows (a topic recreated across the upgrade is then not told apart, as
 * on a broker without topic ids). A table without `_topic_id` holds only such rows.
 */
function intervalFilters(intervals: readonly OffsetIntervalFilter[], hasTopicId: boolean): string[] {
  const filters: string[] = [];
  for (let i = 0; i < intervals.length; i += 64) {
    filters.push(
      intervals
        .slice(i, i + 64)
        .map(
          (v) =>
            `(${intervalFilter(v)}${v.topicId === undefined || !hasTopicId ? '' : ` AND (${TOPIC_ID_COLUMN} = ${quote(v.topicId)} OR ${TOPIC_ID_COLUMN} IS NULL)`})`,
        )
        .join(' OR '),
    );
  }
  return filters;
}

export const quote = (text: string) => `'${text.replace(/'/g, "''")}'`;

export function intervalFilter(v: { topic: string; partition: number; first: number; last: number }): string {
  return `${TOPIC_COLUMN} = ${quote(v.topic)} AND ${PARTITION_COLUMN} = ${v.partition} AND ${OFFSET_COLUMN} >= ${v.first} AND ${OFFSET_COLUMN} <= ${v.last}`;
}

/**
 * Rows in the intervals, of each interval's incarnation only: the rows of a deleted
 * incarnation of the topic share its (topic, partition, offset) and must not count
 * (they would make a publication look published, or more than published). A table
 * without `_topic_id` holds no row of any incarnation that has an id.
 */
export async function countIntervals(
  table: lancedb.Table,
  intervals: readonly OffsetIntervalFilter[],
  hasTopicId: boolean,
): Promise<number> {
  let total = 0;
  for (const filter of intervalFilters(intervals, hasTopicId)) total += await table.countRows(filter);
  return total;
}

/**
 * One row's identity, the table's row key as one string: (_topic, _partition, _offset,
 * _row), `_row` 0 for a table (or staged data) without it, one row per record.
 */
export function rowKey(topic: string, partition: number, offset: number, row: number): string {
  return `${topic}\u0000${partition}\u0000${offset}\u0000${row}`;
}

/** A row key as people write it: topic[partition]@offset#row. */
export function describeRowKey(key: string): string {
  const [topic, partition, offset, row] = key.split('\u0000');
  return `${topic}[${partition}]@${offset}#${row}`;
}

/** How many rows carry each row key (`rowKey`) in the intervals, of each interval's incarnation. */
export async function keyCounts(
  table: lancedb.Table,
  intervals: readonly OffsetIntervalFilter[],
): Promise<Map<string, number>> {
  const fields = (await table.schema()).fields;
  const hasRow = fields.some((f) => f.name === ROW_COLUMN);
  const hasTopicId = fields.some((f) => f.name === TOPIC_ID_COLUMN);
  const columns = [TOPIC_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN, ...(hasRow ? [ROW_COLUMN] : [])];
  const counts = new Map<string, number>();
  for (const filter of intervalFilters(intervals, hasTopicId)) {
    const rows = (await table.query().where(filter).select(columns).toArray()) as {
      readonly _topic: string;
      readonly _partition: number;
      readonly _offset: bigint | number;
      readonly _row?: number | null;
    }[];
    for (const r of rows) {
      const key = rowKey(r._topic, r._partition, Number(r._offset), r._row ?? 0);
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
  }
  return counts;
}
