import type { RecordBatch } from 'apache-arrow';
import type { DeadLetterVerdict } from '../dead-letters/dead-letter-reason';
import type { MinuteKey } from '../staging/part-name';

/** What a decoder makes of one fetched batch of a partition (record-decoder.ts). */
export interface DecodedBatch {
  /** Rows with the system columns; undefined when no record produced a row. */
  readonly batch: RecordBatch | undefined;
  /** One minute for all rows (ingest time) or one per row (event time). */
  readonly minute: MinuteKey | MinuteKey[];
  /**
   * Registry formats: the rows decoded before a writer schema gave a column another type,
   * each run in its own columns' types, in offset order; staged before `batch`. Empty
   * unless a column was retyped in this call.
   */
  readonly earlier: readonly DecodedSegment[];
  readonly deadLetters: DeadLetterVerdict[];
  /** Rows in `earlier` and `batch` together. */
  readonly rows: number;
}

/** Rows of one Arrow schema, decoded before a column was retyped. */
export interface DecodedSegment {
  readonly batch: RecordBatch;
  readonly minute: MinuteKey | MinuteKey[];
  /** The offset of its last record: every record up to it is in this or an earlier segment, or a dead letter. */
  readonly through: number;
}
