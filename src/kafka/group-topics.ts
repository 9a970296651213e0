import type { Admin } from 'kafkajs';
import type { ResolvedConsumer } from '../config';

/** The topics the consumer reads now: those it names, and those the broker has that match its patterns. */
export async function groupTopics(admin: Admin, consumer: ResolvedConsumer): Promise<string[]> {
  if (consumer.topicPatterns.length === 0) return consumer.topics ?? [];
  return matchingTopics(consumer, await admin.listTopics());
}

/** Of the topics a broker has, those the consumer reads: named ones first, in the definition's order. */
export function matchingTopics(
  consumer: Pick<ResolvedConsumer, 'topics' | 'topicPatterns'>,
  existing: readonly string[],
): string[] {
  const patterns = consumer.topicPatterns.map((p) => new RegExp(p));
  const named = consumer.topics ?? [];
  const matched = existing.filter((t) => !named.includes(t) && patterns.some((p) => p.test(t))).sort();
  return [...named, ...matched];
}
