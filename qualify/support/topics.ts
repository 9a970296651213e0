import type { Admin } from 'kafkajs';
import { sleep } from './random';

/**
 * Creates a topic and returns once every partition answers with its offsets. A broker
 * that just started, or one loaded by other suites, answers "does not host this
 * topic-partition" for a while after `createTopics` even with `waitForLeaders` (seen in
 * CI): retry for up to a minute (createTopics of an existing topic just returns false).
 * `configs`: topic-level settings (cleanup.policy, segment.ms, ...).
 */
export async function createTopicReady(
  admin: Admin,
  topic: string,
  partitions: number,
  configs: Readonly<Record<string, string>> = {},
): Promise<void> {
  const configEntries = Object.entries(configs).map(([name, value]) => ({ name, value }));
  for (let attempt = 0; ; attempt++) {
    try {
      await admin.createTopics({
        topics: [
          { topic, numPartitions: partitions, ...(configEntries.length > 0 ? { configEntries } : {}) },
        ],
        waitForLeaders: true,
      });
      const ends = await admin.fetchTopicOffsets(topic);
      if (ends.length === partitions) return;
    } catch (error) {
      if (attempt > 300) throw error;
    }
    await sleep(200);
  }
}

/** Producer retries for a loaded shared broker (kafkajs's default gives up after ~5 retries). */
export const PATIENT_PRODUCER_RETRY = { retries: 10, initialRetryTime: 300, maxRetryTime: 5_000 };
