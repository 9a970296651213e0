import { Kafka, logLevel } from 'kafkajs';
import { pauseTopicsForStop } from '../../src/kafka/join-claims';

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
  expect(pauseTopicsForStop(consumer, ['t'])).toBe(false);
  expect(pauseTopicsForStop(consumer, [])).toBe(true);
});
