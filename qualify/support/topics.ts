import type { Admin } from 'kafkajs';
import { ensureTopicsServed } from '../../src/kafka/protocol/topic-ready';
import { sleep } from './random';

/**
 * Creates a topic and returns once every partition answers with its offsets
 * (src/kafka/protocol/topic-ready.ts says why both are needed). A broker loaded by other suites
 * can refuse `createTopics` itself for a while (seen in CI): that is retried for up to
 * a minute. `configs`: topic-level settings (cleanup.policy, segment.ms, ...).
 */
export async function createTopicReady(
  admin: Admin,
  topic: string,
  partitions: number,
  configs: Readonly<Record<string, string>> = {},
): Promise<void> {
  const configEntries = Object.entries(configs).map(([name, value]) => ({ name, value }));
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      await ensureTopicsServed(admin, [
        { topic, numPartitions: partitions, ...(configEntries.length > 0 ? { configEntries } : {}) },
      ]);
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
    }
    await sleep(200);
  }
}

/** Producer retries for a loaded shared broker (kafkajs's default gives up after ~5 retries). */
export const PATIENT_PRODUCER_RETRY = { retries: 10, initialRetryTime: 300, maxRetryTime: 5_000 };
