/**
 * Kafka offsets as kafka-lance reasons about them. The brands keep the three
 * meanings apart at compile time: an offset read from a record, the highest
 * offset known durable, and the value committed to Kafka (durable + 1) are all
 * plain numbers at run time and easy to mix up by one.
 */
declare const brand: unique symbol;
type Brand<T, B extends string> = T & { readonly [brand]: B };

/** The offset of one record in its partition. */
export type RecordOffset = Brand<number, 'RecordOffset'>;
/** Every record of the partition at or below this offset is durable (staged and fsynced, or dead-lettered). */
export type DurableOffset = Brand<number, 'DurableOffset'>;
/** The value sent to Kafka in a commit: the next offset to consume. */
export type CommitOffset = Brand<number, 'CommitOffset'>;

export const recordOffset = (n: number | bigint | string): RecordOffset => toSafeInteger(n) as RecordOffset;
export const durableOffset = (o: RecordOffset): DurableOffset => o as number as DurableOffset;
export const commitOffsetAfter = (o: DurableOffset): CommitOffset => ((o as number) + 1) as CommitOffset;
/** The last record offset below a committed offset (-1 when nothing is committed yet). */
export const lastOffsetBelow = (c: CommitOffset): DurableOffset => ((c as number) - 1) as DurableOffset;

/** No record of the partition is durable yet. */
export const NOTHING_DURABLE = -1 as DurableOffset;

function toSafeInteger(n: number | bigint | string): number {
  const v = typeof n === 'number' ? n : Number(n);
  if (!Number.isSafeInteger(v)) throw new RangeError(`not a Kafka offset: ${String(n)}`);
  return v;
}

export interface TopicPartition {
  readonly topic: string;
  readonly partition: number;
}

/** A stable map key for a topic-partition; topic names cannot contain '\u0000'. */
export type TopicPartitionKey = Brand<string, 'TopicPartitionKey'>;
export const tpKey = (topic: string, partition: number): TopicPartitionKey =>
  `${topic}\u0000${partition}` as TopicPartitionKey;
export function parseTpKey(key: TopicPartitionKey): TopicPartition {
  const i = key.lastIndexOf('\u0000');
  return { topic: key.slice(0, i), partition: Number(key.slice(i + 1)) };
}
