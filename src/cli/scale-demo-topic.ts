import { writeFileSync } from 'node:fs';
import * as path from 'node:path';
import type { Admin } from 'kafkajs';
import { ensureTopicsServed } from '../kafka/protocol/topic-ready';
import type { RunRanges } from './demo-summary';
import { CONSUMER } from './demo';
import { CliError } from './errors';
import { topicEnds, type PartitionEnds } from './kafka-admin';

/**
 * What the scale demo runs on: its own topic, dead-letter topic and group, and the
 * consumer definition its replicas share.
 */

/** Its own topic and group, so that it never mixes with `kafka-lance demo`'s 6-partition app-logs. */
export const SCALE_TOPIC = 'app-logs-scale';
export const SCALE_DLQ = `${SCALE_TOPIC}.dlq`;
/** The share of produced lines that are broken on purpose (dead letters). */
export const BAD_RATIO = 0.005;
/** A killed member holds its partitions this long: 10 s instead of 30 s keeps the demo short. */
const SESSION_TIMEOUT_MS = 10_000;

/** Where the topics stood before this run: what the run's checks count from. */
export interface TopicsAtStart {
  readonly source: PartitionEnds[];
  readonly deadLetters: PartitionEnds[] | undefined;
}

/**
 * Creates the topic and the DLQ when missing and waits until every partition answers;
 * a topic left by an earlier run with another partition count is refused (the demo
 * would not test what `--partitions` says).
 */
export async function prepareTopics(
  admin: Admin,
  partitions: number,
  brokers: readonly string[],
): Promise<TopicsAtStart> {
  await ensureTopicsServed(admin, [
    { topic: SCALE_TOPIC, numPartitions: partitions },
    { topic: SCALE_DLQ, numPartitions: 1 },
  ]);
  const source = (await topicEnds(admin, SCALE_TOPIC))!;
  const deadLetters = await topicEnds(admin, SCALE_DLQ);
  if (source.length !== partitions) {
    throw new CliError(
      'BAD_ARGUMENT',
      `${SCALE_TOPIC} already has ${source.length} partitions on ${brokers.join(',')}, not ${partitions}: pass --partitions ${source.length}, or delete the topic.`,
    );
  }
  return { source, deadLetters };
}

/**
 * The consumer definition the replicas run: consumers/app-logs.ts on the demo's own
 * topic and group, every replica publishing into one table (`lance.uri`), and a
 * shorter session so that a killed member's partitions move sooner.
 */
export function writeDefinition(dataDir: string): string {
  const file = path.join(dataDir, 'app-logs-scale.consumer.ts');
  writeFileSync(
    file,
    `// Written by \`kafka-lance scale-demo\`: consumers/app-logs.ts, all replicas into one table.
import base from ${JSON.stringify(CONSUMER)};

export default {
  ...base,
  name: ${JSON.stringify(SCALE_TOPIC)},
  topics: [${JSON.stringify(SCALE_TOPIC)}],
  deadLetter: { topic: ${JSON.stringify(SCALE_DLQ)} },
  lance: { uri: ${JSON.stringify(path.join(dataDir, 'lance'))} },
  sessionTimeoutMs: ${SESSION_TIMEOUT_MS},
  heartbeatIntervalMs: 1000,
};
`,
  );
  return file;
}

/** The offsets this run produced, per partition: from the log end at the start to the one at the end. */
export function rangesOf(start: readonly PartitionEnds[], end: readonly PartitionEnds[]): RunRanges {
  return new Map(
    end.map((e) => [
      e.partition,
      { from: start.find((s) => s.partition === e.partition)?.high ?? 0, to: e.high },
    ]),
  );
}
