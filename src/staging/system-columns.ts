import { Field, Int32, Int64, TimeUnit, Timestamp, Utf8 } from 'apache-arrow';

/**
 * Columns kafka-lance adds to every staged row and every Lance table. The triple
 * (_topic, _partition, _offset) is unique per row: exactly-once is checked on it.
 */
export const TOPIC_COLUMN = '_topic';
export const PARTITION_COLUMN = '_partition';
export const OFFSET_COLUMN = '_offset';
export const TIMESTAMP_COLUMN = '_timestamp';
/** Multi-row transforms only: the index of a row among its record's rows. */
export const ROW_COLUMN = '_row';

export const SYSTEM_FIELDS: readonly Field[] = [
  new Field(TOPIC_COLUMN, new Utf8(), false),
  new Field(PARTITION_COLUMN, new Int32(), false),
  new Field(OFFSET_COLUMN, new Int64(), false),
  new Field(TIMESTAMP_COLUMN, new Timestamp(TimeUnit.MILLISECOND), false),
];
