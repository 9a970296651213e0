import type { Admin, Kafka } from 'kafkajs';
import { BrokerUnreachableError, isConnectionFailure } from './errors';

/** Connects an admin client; a broker that cannot be reached becomes an error that names its address. */
export async function connectAdmin(kafka: Kafka, brokers: readonly string[]): Promise<Admin> {
  const admin = kafka.admin();
  try {
    await admin.connect();
  } catch (error) {
    throw isConnectionFailure(error) ? new BrokerUnreachableError(brokers, error) : error;
  }
  return admin;
}

export interface PartitionEnds {
  readonly partition: number;
  /** First offset still in the log (retention may have deleted earlier ones). */
  readonly low: number;
  /** The log end: the offset the next record gets. */
  readonly high: number;
}

/** Log start and end of each partition, or undefined when the topic does not exist. */
export async function topicEnds(admin: Admin, topic: string): Promise<PartitionEnds[] | undefined> {
  if (!(await admin.listTopics()).includes(topic)) return undefined;
  const ends = await admin.fetchTopicOffsets(topic);
  return ends
    .map((e) => ({ partition: e.partition, low: Number(e.low), high: Number(e.high) }))
    .sort((a, b) => a.partition - b.partition);
}

/** Committed offsets of a group per partition of the topics; -1 where it never committed. */
export async function committedOffsets(
  admin: Admin,
  groupId: string,
  topics: readonly string[],
): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  if (topics.length === 0) return out;
  for (const t of await admin.fetchOffsets({ groupId, topics: [...topics] })) {
    for (const p of t.partitions) out.set(`${t.topic}\u0000${p.partition}`, Number(p.offset));
  }
  return out;
}

export const partitionKey = (topic: string, partition: number): string => `${topic}\u0000${partition}`;
