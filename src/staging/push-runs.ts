import type { RecordBatch } from 'apache-arrow';
import { KafkaLanceError, OffsetOrderError } from '../common/errors';
import type { MinuteKey } from './part-name';
import { OFFSET_COLUMN, int64Numbers } from './system-columns';

/*
 * How a pushed batch is read before its rows go to parts: its offsets, checked to
 * never step back, and cut into runs of one minute each (one part per minute).
 */

/** The `_offset` column as plain numbers (Kafka offsets fit in 2^53), read from its buffers. */
export function offsetsOf(batch: RecordBatch): Float64Array {
  const column = batch.getChild(OFFSET_COLUMN);
  if (!column)
    throw new KafkaLanceError('PART_SCHEMA_MISMATCH', `a staged batch lacks the ${OFFSET_COLUMN} column`);
  const out = new Float64Array(batch.numRows);
  let row = 0;
  for (const data of column.data) {
    const values: unknown = data.values;
    if (!(values instanceof BigInt64Array) || data.nullCount > 0) {
      for (let i = 0; i < data.length; i++, row++) out[row] = Number(column.get(row) as bigint);
      continue;
    }
    const offset = int64Numbers(values);
    for (let i = 0; i < data.length; i++) out[row++] = offset(i);
  }
  return out;
}

/**
 * Rows of one record share its offset (a multi-row transform numbers them in `_row`),
 * so equal neighbours are one record's rows; only a step back is a bug upstream.
 */
export function checkNonDecreasing(
  topic: string,
  partition: number,
  offsets: Float64Array,
  from: number,
): void {
  for (let i = from + 1; i < offsets.length; i++) {
    if (offsets[i]! < offsets[i - 1]!)
      throw new OffsetOrderError(topic, partition, offsets[i - 1]!, offsets[i]!);
  }
}

/**
 * Contiguous runs of rows that share a minute, from row `from` on. A run never ends
 * inside a record (rows of equal offset): a record's rows stay in one part, so one
 * publication holds all of them or none, and a publication's offset runs never count
 * another publication's rows.
 */
export function* minuteRuns(
  minute: MinuteKey | readonly MinuteKey[],
  offsets: Float64Array,
  from: number,
  to: number,
): Generator<{ minute: MinuteKey; from: number; to: number }> {
  if (typeof minute === 'string') {
    if (from < to) yield { minute, from, to };
    return;
  }
  if (minute.length !== to) throw new RangeError(`${minute.length} minutes for ${to} rows`);
  let start = from;
  for (let i = from + 1; i <= to; i++) {
    if (i === to || (minute[i] !== minute[start] && offsets[i] !== offsets[i - 1])) {
      yield { minute: minute[start]!, from: start, to: i };
      start = i;
    }
  }
}
