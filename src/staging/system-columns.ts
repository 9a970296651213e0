import {
  DataType,
  Field,
  Int32,
  Int64,
  TimeUnit,
  Timestamp,
  Utf8,
  type Data,
  type RecordBatch,
} from 'apache-arrow';
import { endianness } from 'node:os';

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
/**
 * The incarnation of the row's topic: Kafka's topic id (URL-safe base64, as Kafka
 * prints it), '' when the broker could not tell. A topic deleted and recreated under
 * the same name starts its offsets at 0 again, so only this column tells its rows from
 * the old incarnation's. Null in rows of tables written before it existed.
 */
export const TOPIC_ID_COLUMN = '_topic_id';

/**
 * Upsert tables only: whether the row is its key's delete (a tombstone). Kept as a row,
 * written by the same merge as the publication's upserts, so that the delete is atomic
 * with them and an older record of the key met later loses to it (docs/design/upserts.md).
 * Readers filter `_deleted = false`.
 */
export const DELETED_COLUMN = '_deleted';

export const SYSTEM_FIELDS: readonly Field[] = [
  new Field(TOPIC_COLUMN, new Utf8(), false),
  new Field(PARTITION_COLUMN, new Int32(), false),
  new Field(OFFSET_COLUMN, new Int64(), false),
  new Field(TIMESTAMP_COLUMN, new Timestamp(TimeUnit.MILLISECOND), false),
  new Field(TOPIC_ID_COLUMN, new Utf8(), false),
];

/** Row-wise access to a staged batch's system columns, straight from its buffers. */
export interface SystemColumnReader {
  readonly topic: (row: number) => string;
  readonly partition: (row: number) => number;
  readonly offset: (row: number) => number;
  /** The row's topic id; undefined for a part staged before the column existed (or a null). */
  readonly topicId: (row: number) => string | undefined;
}

/**
 * Reads `_topic`, `_partition` and `_offset` without apache-arrow's per-row `get`
 * (a visitor dispatch, a UTF-8 decode per topic and a BigInt per offset: ~1 s of the
 * materializer's CPU per GiB staged, found with --cpu-prof). Topics repeat, so a
 * topic is decoded again only when its bytes differ from the previous row's. Offsets
 * are below 2^53 (Kafka offsets are int64 but never near it), read as two uint32
 * halves. Returns undefined when a column is missing or not of its staged type.
 */
export function systemColumnReader(batch: RecordBatch): SystemColumnReader | undefined {
  const topics = batch.getChild(TOPIC_COLUMN)?.data;
  const partitions = batch.getChild(PARTITION_COLUMN)?.data;
  const offsets = batch.getChild(OFFSET_COLUMN)?.data;
  if (
    !topics ||
    !partitions ||
    !offsets ||
    topics.length !== 1 ||
    partitions.length !== 1 ||
    offsets.length !== 1
  )
    return undefined;
  const t = topics[0]!;
  const p = partitions[0]!;
  const o = offsets[0]!;
  if (
    !DataType.isUtf8(t.type) ||
    !(DataType.isInt(p.type) && p.type.bitWidth === 32) ||
    !(DataType.isInt(o.type) && o.type.bitWidth === 64)
  )
    return undefined;
  // apache-arrow slices these buffers with the Data (Data.slice): row i is at index i.
  const partitionValues = p.values as Int32Array;
  const offset = int64Numbers(o.values as BigInt64Array);
  const topic = repeatedUtf8(t as Data<Utf8>);
  const ids = batch.getChild(TOPIC_ID_COLUMN);
  // Read per row by intervalsOf: decoded once per run of equal ids, like the topic.
  const id =
    ids && ids.data.length === 1 && DataType.isUtf8(ids.type)
      ? repeatedUtf8(ids.data[0] as Data<Utf8>)
      : (row: number) => (ids?.get(row) as string | null | undefined) ?? null;
  return {
    topic: (row) => topic(row) ?? '',
    topicId: (row) => id(row) ?? undefined,
    partition: (row) => partitionValues[row]!,
    offset,
  };
}

/** Whether an int64 lies in memory low half first, as `int64Numbers` reads it. */
const LITTLE_ENDIAN = endianness() === 'LE';

/**
 * Row i of an int64 column's values as a number, exact below 2^53 (Kafka offsets), read as
 * two 32-bit halves: a BigInt per row (apache-arrow's `get`, or the array's own index) was
 * ~36 MB of the main thread's garbage per 1M records. apache-arrow slices the values with
 * their Data (Data.slice), so row i is at index i.
 */
export function int64Numbers(values: BigInt64Array): (row: number) => number {
  if (!LITTLE_ENDIAN) return (row) => Number(values[row]);
  const halves = new Int32Array(values.buffer, values.byteOffset, values.length * 2);
  // The low half unsigned, the high half signed, as an int64's are.
  return (row) => (halves[2 * row]! >>> 0) + halves[2 * row + 1]! * 0x1_0000_0000;
}

/** The reader of a batch read back from a validated part (its system columns were checked when it was catalogued). */
export function stagedColumns(batch: RecordBatch): SystemColumnReader {
  const reader = systemColumnReader(batch);
  if (!reader) throw new Error('a staged batch without its _topic/_partition/_offset columns');
  return reader;
}

/**
 * A Utf8 column's value per row (null where the row is null), decoded again only when
 * its bytes differ from the previous row's: topics and topic ids repeat for a whole part.
 */
function repeatedUtf8(data: Data<Utf8>): (row: number) => string | null {
  const valueOffsets = data.valueOffsets;
  const bytes = data.values;
  const decoder = new TextDecoder();
  let lastStart = -1;
  let lastEnd = -1;
  let last = '';
  return (row) => {
    if (!data.getValid(row)) return null;
    const start = valueOffsets[row]!;
    const end = valueOffsets[row + 1]!;
    if (lastStart >= 0 && end - start === lastEnd - lastStart) {
      let same = true;
      for (let i = 0; i < end - start; i++) {
        if (bytes[start + i] !== bytes[lastStart + i]) {
          same = false;
          break;
        }
      }
      if (same) return last;
    }
    lastStart = start;
    lastEnd = end;
    last = decoder.decode(bytes.subarray(start, end));
    return last;
  };
}
