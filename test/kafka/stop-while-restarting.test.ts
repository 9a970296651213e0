import { Kafka, logLevel } from 'kafkajs';
import { pauseIfRunning, pauseTopics, resumeIfRunning } from '../../src/kafka/consumer-pauses';

/**
 * A SIGTERM that arrives while kafkajs restarts a crashed consumer finds it without a
 * group: kafkajs's pause() then throws "Consumer group was not initialized", which ended
 * the stop in replica.stop.failed (exit 1). A kafkajs consumer that has not run is in
 * that same state (no consumer group object).
 */
test('a stop pauses a consumer that has no group (between a crash and its restart) without failing', () => {
  const consumer = new Kafka({ brokers: ['127.0.0.1:1'], logLevel: logLevel.NOTHING }).consumer({
    groupId: 'never-joined',
  });
  expect(() => consumer.pause([{ topic: 't' }])).toThrow(/Consumer group was not initialized/);
  expect(pauseTopics(consumer, ['t'])).toBe(false);
  expect(pauseTopics(consumer, [])).toBe(true);
});

/**
 * The same window, opened by a crash kafkajs does not restart from, lasts until the
 * replica starts the consumer again (consumer-restart.ts: up to a minute while the
 * cluster is out of reach). A partition the dead-letter outbox stops then (its writes
 * failed for errors.retryTimeoutMs), or a disk filling or freeing, pauses or resumes the
 * consumer: those must not throw (an unhandled rejection ends the process).
 */
test('a partition stopped or a disk filled while the consumer has no group neither throws nor pauses', () => {
  const consumer = new Kafka({ brokers: ['127.0.0.1:1'], logLevel: logLevel.NOTHING }).consumer({
    groupId: 'never-joined',
  });
  expect(() => consumer.resume([{ topic: 't' }])).toThrow(/Consumer group was not initialized/);
  expect(pauseIfRunning(consumer, [{ topic: 't', partitions: [0] }])).toBe(false);
  expect(resumeIfRunning(consumer, [{ topic: 't', partitions: [0] }])).toBe(false);
  expect(resumeIfRunning(consumer, [])).toBe(false);
  // Any other error of pause() is still thrown: a malformed request is a bug to see.
  expect(() => pauseIfRunning(consumer, [{ topic: '' }])).toThrow(/Invalid topic/);
});
