import type { ResolvedConsumer } from '../config';

/** What decides where a partition with no committed offset starts. */
export interface InitialPositionRule {
  readonly consumer: Pick<ResolvedConsumer, 'fromBeginning' | 'topics'>;
  /** The group had committed offsets when this replica started: not the group's first start. */
  readonly groupHadCommits: boolean;
  /** Topics this replica's refreshes added while it ran (created after its start). */
  readonly discovered: (topic: string) => boolean;
}

/**
 * Whether a partition with no committed offset starts at the log's earliest offset.
 * `fromBeginning` applies to the group's first start only. A topic a pattern matches
 * that has no commit once the group already has some was created (or first matched)
 * after the group began: every record of it is new to the group, so it is read from
 * its earliest offset. Deciding this from what this replica saw alone would skip those
 * records when the replica restarts before its first claim lands, or when another
 * replica that never saw the topic appear leads the rebalance that assigns it.
 */
export function startsFromEarliest(rule: InitialPositionRule, topic: string): boolean {
  if (rule.consumer.fromBeginning) return true;
  if (rule.consumer.topics?.includes(topic)) return false;
  return rule.groupHadCommits || rule.discovered(topic);
}
