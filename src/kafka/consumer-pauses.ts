import type { Consumer } from 'kafkajs';

/** Topics, or some of their partitions, as kafkajs's pause() and resume() take them. */
type Partitions = Parameters<Consumer['pause']>[0];

/** What kafkajs's pause() and resume() throw while its consumer has no group. */
const NO_GROUP = 'Consumer group was not initialized';

/**
 * Pauses and resumes that hold in whatever state the kafkajs consumer is. Between a crash
 * and the consumer's next run (kafkajs's own restart, or consumer-restart.ts's, which may
 * wait a minute while the cluster is out of reach) the consumer has no group, and pause()
 * and resume() throw: nothing fetches then, and the next join pauses again what must stay
 * paused (join-claims.ts: a full disk's topics, the partitions the dead-letter outbox
 * stopped). So a pause or resume then is skipped. Each returns whether the consumer was
 * running; any other error (a malformed topic list) is thrown.
 */
export function pauseIfRunning(consumer: Pick<Consumer, 'pause'>, partitions: Partitions): boolean {
  return ifRunning(() => consumer.pause(partitions));
}

export function resumeIfRunning(consumer: Pick<Consumer, 'resume'>, partitions: Partitions): boolean {
  return ifRunning(() => consumer.resume(partitions));
}

/** Pauses whole topics (each named once). */
export function pauseTopics(consumer: Pick<Consumer, 'pause'>, topics: readonly string[]): boolean {
  const unique = [...new Set(topics)];
  return (
    unique.length === 0 ||
    pauseIfRunning(
      consumer,
      unique.map((topic) => ({ topic })),
    )
  );
}

function ifRunning(act: () => void): boolean {
  try {
    act();
    return true;
  } catch (error) {
    if (error instanceof Error && error.message.startsWith(NO_GROUP)) return false;
    throw error;
  }
}
