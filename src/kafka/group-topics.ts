import type { Admin } from 'kafkajs';
import type { ResolvedConsumer } from '../config';

/** The topics the consumer reads now: its list, or those the broker has that match its pattern. */
export async function groupTopics(admin: Admin, consumer: ResolvedConsumer): Promise<string[]> {
  if (consumer.topics) return consumer.topics;
  const pattern = new RegExp(consumer.topicsRegex!);
  return (await admin.listTopics()).filter((t) => pattern.test(t));
}
