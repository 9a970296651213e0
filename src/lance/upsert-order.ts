import type { RecordBatch } from 'apache-arrow';
import { SEQUENCE_COLUMN } from '../config/upsert-options';
import {
  OFFSET_COLUMN,
  PARTITION_COLUMN,
  ROW_COLUMN,
  TIMESTAMP_COLUMN,
  TOPIC_COLUMN,
  TOPIC_ID_COLUMN,
} from '../staging/system-columns';
import { keyValues } from './upsert-keys';

/**
 * A row's place in Kafka's order (docs/design/upserts.md): which of two records of a key is
 * newer, in TypeScript (reducing a publication, reading the table's rows) and in SQL (the
 * merge's condition), so that both decide alike; and the position columns a read of the
 * table selects.
 */

/** A row's place in Kafka's order, as the merge condition compares it. */
export interface Position {
  readonly topic: string;
  readonly topicId: string | undefined;
  readonly partition: number;
  readonly offset: number;
  readonly row: number;
  readonly timestamp: number;
  /** The source sequence (`_sequence`, such as Debezium's `source.lsn`); null or absent: none. */
  readonly sequence?: bigint | null;
}

/**
 * Whether `a` is newer than `b`, exactly as `newerCondition` says it in SQL. In one
 * partition (of one topic incarnation) Kafka's order: the offset, then the row of a
 * record's transform. Across partitions Kafka has no order, so a key that moved
 * partition (the topic's partition count changed) or topic is ordered by its records'
 * timestamps, ties broken by partition then offset, so that every replica and every
 * replay decides alike. A tie of timestamps goes to the higher partition: a key that moved
 * to a lower partition within the same millisecond as its last record in the old one keeps
 * the old one's value (docs/design/upserts.md).
 */
export function newer(a: Position, b: Position): boolean {
  // A source sequence on both sides orders them first (a key's records across partitions and
  // topics included); equal or missing, the Kafka order decides.
  if (a.sequence != null && b.sequence != null && a.sequence !== b.sequence) return a.sequence > b.sequence;
  if (a.topic === b.topic && sameIncarnation(a.topicId, b.topicId) && a.partition === b.partition)
    return a.offset > b.offset || (a.offset === b.offset && a.row > b.row);
  if (a.timestamp !== b.timestamp) return a.timestamp > b.timestamp;
  if (a.partition !== b.partition) return a.partition > b.partition;
  return a.offset > b.offset;
}

/**
 * Whether two topic ids name the same incarnation. An unknown id ('': a broker without
 * topic ids, or a row staged before they were read) matches any: rows of one partition
 * then still compare by offset, never by timestamp (which would let an older record with a
 * later producer time win). Only a recreated topic read with ids on both sides differs.
 */
function sameIncarnation(a: string | undefined, b: string | undefined): boolean {
  return a === b || !a || !b;
}

/** `newer(source, target)` as a merge-insert condition (`source.` and `target.` columns). */
export function newerCondition(hasRow: boolean, hasSequence = false): string {
  const kafka = kafkaNewerCondition(hasRow);
  if (!hasSequence) return kafka;
  const s = `source.${SEQUENCE_COLUMN}`;
  const t = `target.${SEQUENCE_COLUMN}`;
  // Never NULL: IS NOT NULL is a boolean, and FALSE AND NULL is FALSE.
  const differ = `(${s} IS NOT NULL AND ${t} IS NOT NULL AND ${s} <> ${t})`;
  return `(${differ} AND ${s} > ${t}) OR (NOT ${differ} AND (${kafka}))`;
}

/** The Kafka order of `newer` in SQL. */
function kafkaNewerCondition(hasRow: boolean): string {
  const s = (c: string) => `source.${c}`;
  const t = (c: string) => `target.${c}`;
  const unknownId = (c: string) => `${c} IS NULL OR ${c} = ''`;
  const sameId = `(${s(TOPIC_ID_COLUMN)} = ${t(TOPIC_ID_COLUMN)} OR ${unknownId(s(TOPIC_ID_COLUMN))} OR ${unknownId(t(TOPIC_ID_COLUMN))})`;
  const same = [
    `${s(TOPIC_COLUMN)} = ${t(TOPIC_COLUMN)}`,
    sameId,
    `${s(PARTITION_COLUMN)} = ${t(PARTITION_COLUMN)}`,
  ].join(' AND ');
  const offsetNewer = `${s(OFFSET_COLUMN)} > ${t(OFFSET_COLUMN)}`;
  const inPartition = hasRow
    ? `${offsetNewer} OR (${s(OFFSET_COLUMN)} = ${t(OFFSET_COLUMN)} AND ${s(ROW_COLUMN)} > ${t(ROW_COLUMN)})`
    : offsetNewer;
  const across =
    `${s(TIMESTAMP_COLUMN)} > ${t(TIMESTAMP_COLUMN)} OR (${s(TIMESTAMP_COLUMN)} = ${t(TIMESTAMP_COLUMN)} AND ` +
    `(${s(PARTITION_COLUMN)} > ${t(PARTITION_COLUMN)} OR (${s(PARTITION_COLUMN)} = ${t(PARTITION_COLUMN)} AND ${offsetNewer})))`;
  return `((${same}) AND (${inPartition})) OR (NOT (${same}) AND (${across}))`;
}

export const POSITION_COLUMNS = [
  TOPIC_COLUMN,
  TOPIC_ID_COLUMN,
  PARTITION_COLUMN,
  OFFSET_COLUMN,
  TIMESTAMP_COLUMN,
];

/** A batch read from the table: each row's position. */
export function positionsOf(batch: RecordBatch): (row: number) => Position {
  const topics = batch.getChild(TOPIC_COLUMN)!;
  const ids = batch.getChild(TOPIC_ID_COLUMN);
  const partitions = batch.getChild(PARTITION_COLUMN)!;
  const offsets = keyValues(batch.getChild(OFFSET_COLUMN)!);
  const timestamps = keyValues(batch.getChild(TIMESTAMP_COLUMN)!);
  const rows = batch.getChild(ROW_COLUMN);
  const sequenceColumn = batch.getChild(SEQUENCE_COLUMN);
  const sequences = sequenceColumn ? keyValues(sequenceColumn) : undefined;
  return (i) => ({
    sequence: sequences ? (sequences(i) as bigint | null) : null,
    topic: topics.get(i) as string,
    topicId: (ids?.get(i) as string | null | undefined) ?? undefined,
    partition: partitions.get(i) as number,
    offset: Number(offsets(i)),
    row: Number(rows?.get(i) ?? 0),
    timestamp: Number(timestamps(i) ?? 0),
  });
}
