import {
  KafkaJSConnectionError,
  KafkaJSGroupCoordinatorNotFound,
  KafkaJSNonRetriableError,
  KafkaJSSASLAuthenticationError,
} from 'kafkajs';
import { createLogger } from '../../src/common/logger';
import { ConsumerRestart } from '../../src/kafka/consumer-restart';
import { brokerUnavailableOf } from '../../src/kafka/protocol/broker-unavailable';
import { Metrics } from '../../src/metrics/metrics';

/** kafkajs's error constructors as its source has them (its typings leave out the arguments). */
const kafkaError = (type: unknown) => type as new (e: Error | string, o?: { cause: Error }) => Error;
const saslRefused = () => new (kafkaError(KafkaJSSASLAuthenticationError))('invalid credentials');

/**
 * What a consumer's coordinator lookup ends in when no broker answers (every broker of
 * the cluster restarting): kafkajs's retrier (retry/index.js) rejects with the lookup's
 * error wrapped in a non-retriable one that names it as its cause, so kafkajs itself does
 * not restart the consumer (crash restart=false).
 */
const coordinatorNotFound = () => {
  const lookup = new (kafkaError(KafkaJSGroupCoordinatorNotFound))('Failed to find group coordinator');
  return new (kafkaError(KafkaJSNonRetriableError))(lookup, { cause: lookup });
};

function harness(restartResult: () => Promise<void> = () => Promise.resolve()) {
  const metrics = new Metrics();
  const failures: Error[] = [];
  const events: { event?: string; cause?: string; retryInMs?: number }[] = [];
  let restarts = 0;
  const restart = new ConsumerRestart({
    logger: createLogger({}, { write: (line: string) => void events.push(JSON.parse(line) as never) }),
    metrics,
    tls: false,
    restart: () => {
      restarts += 1;
      return restartResult();
    },
    fail: (e) => failures.push(e),
  });
  const counted = async (reason: string) =>
    (await metrics.consumerRestarts.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
  return { restart, failures, events, restarts: () => restarts, counted };
}

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

test('a cluster out of reach is recognised through kafkajs wrappers; other crashes are not', () => {
  expect(brokerUnavailableOf(coordinatorNotFound())).toMatch(/group coordinator/);
  expect(brokerUnavailableOf(new KafkaJSConnectionError('Connection error: connect ECONNREFUSED'))).toMatch(
    /connection failed/,
  );
  expect(brokerUnavailableOf(Object.assign(new Error('read'), { code: 'ECONNRESET' }))).toMatch(/ECONNRESET/);
  expect(brokerUnavailableOf(new Error('staging failed: ENOSPC'))).toBeUndefined();
  expect(brokerUnavailableOf(new KafkaJSNonRetriableError('Invalid topic'))).toBeUndefined();
  expect(brokerUnavailableOf('not an error')).toBeUndefined();
});

test('a coordinator that cannot be found after the brokers went away restarts the consumer, with a growing delay reset by a join', async () => {
  const h = harness();
  expect(h.restart.onCrash(coordinatorNotFound(), true)).toBe(true);
  jest.advanceTimersByTime(1_999);
  expect(h.restarts()).toBe(0);
  jest.advanceTimersByTime(1);
  expect(h.restarts()).toBe(1);
  // Still down: the restarted consumer crashes the same way, and waits twice as long.
  expect(h.restart.onCrash(coordinatorNotFound(), true)).toBe(true);
  jest.advanceTimersByTime(3_999);
  expect(h.restarts()).toBe(1);
  jest.advanceTimersByTime(1);
  expect(h.restarts()).toBe(2);
  h.restart.onJoin();
  expect(h.restart.onCrash(coordinatorNotFound(), true)).toBe(true);
  jest.advanceTimersByTime(2_000);
  expect(h.restarts()).toBe(3);
  expect(await h.counted('broker_unavailable')).toBe(3);
  expect(h.events.map((e) => [e.event, e.retryInMs])).toEqual([
    ['kafka.unavailable', 2_000],
    ['kafka.unavailable', 4_000],
    ['kafka.available', undefined],
    ['kafka.unavailable', 2_000],
  ]);
  expect(h.events[0]!.cause).toMatch(/no broker could name the group coordinator/);
  expect(h.failures).toEqual([]);
});

test('a cluster out of reach before the first join is also restarted; a refusal of the credentials then is not', () => {
  const h = harness();
  expect(h.restart.onCrash(coordinatorNotFound(), false)).toBe(true);
  expect(h.restart.onCrash(saslRefused(), false)).toBe(false);
  expect(h.restart.onCrash(saslRefused(), true)).toBe(true);
});

test('a crash of another cause is left to the fatal path, and nothing restarts once stopped', () => {
  const h = harness();
  expect(h.restart.onCrash(new Error('eachBatch failed: the table is gone'), true)).toBe(false);
  h.restart.stop();
  expect(h.restart.onCrash(coordinatorNotFound(), true)).toBe(false);
  jest.advanceTimersByTime(120_000);
  expect(h.restarts()).toBe(0);
});

test('a stop while a restart is scheduled cancels it', () => {
  const h = harness();
  expect(h.restart.onCrash(coordinatorNotFound(), true)).toBe(true);
  h.restart.stop();
  jest.advanceTimersByTime(120_000);
  expect(h.restarts()).toBe(0);
});

test('a restart that throws for another cause fails the replica instead of leaving the consumer stopped', async () => {
  const h = harness(() => Promise.reject(new Error('subscription state lost')));
  expect(h.restart.onCrash(coordinatorNotFound(), true)).toBe(true);
  await jest.advanceTimersByTimeAsync(2_000);
  expect(h.restarts()).toBe(1);
  expect(h.failures.map((e) => e.message)).toEqual(['subscription state lost']);
});
