import {
  Kafka,
  logLevel,
  KafkaJSConnectionError,
  KafkaJSNumberOfRetriesExceeded,
  KafkaJSNonRetriableError,
  KafkaJSSASLAuthenticationError,
} from 'kafkajs';
import { createLogger } from '../../src/common/logger';
import { CONSUMER_RETRY, ConsumerRestart } from '../../src/kafka/consumer-restart';
import { restartableCrashOf } from '../../src/kafka/protocol/crash-cause';
import { Metrics } from '../../src/metrics/metrics';
import { coordinatorLookupFailure } from '../../src/faults/replica-hooks';

/** kafkajs's error constructors as its source has them (its typings leave out the arguments). */
const kafkaError = (type: unknown) => type as new (e: Error | string, o?: { cause: Error }) => Error;
const saslRefused = () => new (kafkaError(KafkaJSSASLAuthenticationError))('invalid credentials');

/** What a coordinator lookup no broker answered ends in, as kafkajs wraps it (crash restart=false). */
const coordinatorNotFound = coordinatorLookupFailure;

function harness(restartResult: () => Promise<void> = () => Promise.resolve(), joined = true) {
  const metrics = new Metrics();
  const failures: Error[] = [];
  const events: { event?: string; cause?: string; retryInMs?: number }[] = [];
  let restarts = 0;
  const restart = new ConsumerRestart({
    logger: createLogger({}, { write: (line: string) => void events.push(JSON.parse(line) as never) }),
    metrics,
    restart: () => {
      restarts += 1;
      return restartResult();
    },
    joined: () => joined,
    fail: (e) => failures.push(e),
  });
  const counted = async (reason: string) =>
    (await metrics.consumerRestarts.get()).values.find((v) => v.labels.reason === reason)?.value;
  const stopped = async () => (await metrics.consumerStopped.get()).values[0]?.value;
  return { restart, metrics, failures, events, restarts: () => restarts, counted, stopped };
}

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

test('a crash is read as kafkajs reads it, plus the coordinator lookup no broker answered; other crashes are not restarted', () => {
  const reasonOf = (e: unknown) => restartableCrashOf(e)?.reason;
  expect(restartableCrashOf(coordinatorNotFound())).toEqual({
    reason: 'broker_unavailable',
    cause: expect.stringMatching(/no broker named the group coordinator/) as unknown,
  });
  // What kafkajs restarts from by itself: a retriable innermost cause, or retries exhausted.
  const closed = new KafkaJSConnectionError('Closed connection');
  expect(restartableCrashOf(closed)).toEqual({
    reason: 'retriable_error',
    cause: 'KafkaJSConnectionError: Closed connection',
  });
  const exhausted = new (kafkaError(KafkaJSNumberOfRetriesExceeded))(new Error('eachBatch failed'), {
    cause: new Error('eachBatch failed'),
  });
  expect(reasonOf(exhausted)).toBe('retriable_error');
  // Not retriable at its innermost cause: kafkajs would not restart, nor does the replica.
  const wrappedPlain = new (kafkaError(KafkaJSNonRetriableError))(new Error('x'), {
    cause: new Error('plain'),
  });
  expect(reasonOf(wrappedPlain)).toBeUndefined();
  const ours = new Error('fetch failed', {
    cause: Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }),
  });
  expect(reasonOf(ours)).toBeUndefined();
  expect(reasonOf(new KafkaJSNonRetriableError('Invalid topic'))).toBeUndefined();
  expect(reasonOf('not an error')).toBeUndefined();
});

test('a coordinator that cannot be found after the brokers went away restarts the consumer, with a growing delay reset by a join', async () => {
  const h = harness();
  expect(await h.counted('broker_unavailable')).toBe(0);
  expect(await h.counted('retriable_error')).toBe(0);
  expect(h.restart.onCrash(coordinatorNotFound())).toBe(true);
  expect(await h.stopped()).toBe(1);
  jest.advanceTimersByTime(1_999);
  expect(h.restarts()).toBe(0);
  jest.advanceTimersByTime(1);
  expect(h.restarts()).toBe(1);
  // Still down: the restarted consumer crashes the same way, and waits twice as long.
  expect(h.restart.onCrash(coordinatorNotFound())).toBe(true);
  jest.advanceTimersByTime(3_999);
  expect(h.restarts()).toBe(1);
  jest.advanceTimersByTime(1);
  expect(h.restarts()).toBe(2);
  h.restart.onJoin();
  expect(await h.stopped()).toBe(0);
  expect(h.restart.onCrash(coordinatorNotFound())).toBe(true);
  jest.advanceTimersByTime(2_000);
  expect(h.restarts()).toBe(3);
  expect(await h.counted('broker_unavailable')).toBe(3);
  expect(h.events.map((e) => [e.event, e.retryInMs])).toEqual([
    ['kafka.consumer.restarting', 2_000],
    ['kafka.consumer.restarting', 4_000],
    ['kafka.consumer.rejoined', undefined],
    ['kafka.consumer.restarting', 2_000],
  ]);
  expect(h.events[0]!.cause).toMatch(/no broker named the group coordinator/);
  expect(h.failures).toEqual([]);
});

test('a long outage waits at most a minute between restarts', () => {
  const h = harness();
  for (let i = 0; i < 8; i++) {
    expect(h.restart.onCrash(coordinatorNotFound())).toBe(true);
    jest.advanceTimersByTime(60_000);
    expect(h.restarts()).toBe(i + 1);
  }
  expect(h.events.at(-1)?.retryInMs).toBe(60_000);
});

test('a cluster out of reach before the first join is also restarted; a refusal of the credentials then is not', () => {
  const before = harness(undefined, false);
  expect(before.restart.onCrash(coordinatorNotFound())).toBe(true);
  expect(before.restart.onCrash(saslRefused())).toBe(false);
  expect(harness().restart.onCrash(saslRefused())).toBe(true);
});

test('a crash of another cause is left to the fatal path, and nothing restarts once stopped', () => {
  const h = harness();
  expect(h.restart.onCrash(new KafkaJSNonRetriableError('eachBatch failed: the table is gone'))).toBe(false);
  h.restart.stop();
  expect(h.restart.onCrash(coordinatorNotFound())).toBe(false);
  jest.advanceTimersByTime(120_000);
  expect(h.restarts()).toBe(0);
});

test('a stop while a restart is scheduled cancels it; so does a subscription change, which runs the consumer itself', () => {
  const h = harness();
  expect(h.restart.onCrash(coordinatorNotFound())).toBe(true);
  h.restart.stop();
  jest.advanceTimersByTime(120_000);
  expect(h.restarts()).toBe(0);

  const taken = harness();
  expect(taken.restart.onCrash(new KafkaJSConnectionError('Closed connection'))).toBe(true);
  taken.restart.cancelScheduled();
  jest.advanceTimersByTime(120_000);
  expect(taken.restarts()).toBe(0);
  // The next crash schedules as usual.
  expect(taken.restart.onCrash(new KafkaJSConnectionError('Closed connection'))).toBe(true);
  jest.advanceTimersByTime(60_000);
  expect(taken.restarts()).toBe(1);
});

test('a restart under way is waited for by whatever stops the consumer next', async () => {
  let finish!: () => void;
  const h = harness(() => new Promise<void>((resolve) => (finish = resolve)));
  expect(h.restart.onCrash(coordinatorNotFound())).toBe(true);
  await jest.advanceTimersByTimeAsync(2_000);
  expect(h.restarts()).toBe(1);
  let settled = false;
  const waiting = h.restart.settled().then(() => (settled = true));
  await jest.advanceTimersByTimeAsync(10);
  expect(settled).toBe(false);
  finish();
  await waiting;
  expect(settled).toBe(true);
});

test('a restart that throws for a qualifying cause is retried; for another cause it fails the replica', async () => {
  const again = harness(() => Promise.reject(coordinatorNotFound()));
  expect(again.restart.onCrash(coordinatorNotFound())).toBe(true);
  await jest.advanceTimersByTimeAsync(2_000);
  await jest.advanceTimersByTimeAsync(4_000);
  expect(again.restarts()).toBe(2);
  expect(again.failures).toEqual([]);

  const other = harness(() => Promise.reject(new Error('subscription state lost')));
  expect(other.restart.onCrash(coordinatorNotFound())).toBe(true);
  await jest.advanceTimersByTimeAsync(2_000);
  expect(other.restarts()).toBe(1);
  expect(other.failures.map((e) => e.message)).toEqual(['subscription state lost']);
});

test('a restart that throws after the stop is not reported as a failure', async () => {
  let fail!: (e: Error) => void;
  const h = harness(() => new Promise<void>((_, reject) => (fail = reject)));
  expect(h.restart.onCrash(coordinatorNotFound())).toBe(true);
  await jest.advanceTimersByTimeAsync(2_000);
  h.restart.stop();
  fail(new Error('disconnected by the stop'));
  await h.restart.settled();
  expect(h.failures).toEqual([]);
});

test('a TLS handshake closed midway while running is a broker going away, not a listener without TLS', async () => {
  const h = harness();
  const closed = new KafkaJSConnectionError(
    'Client network socket disconnected before secure TLS connection was established',
  );
  expect(h.restart.onCrash(closed)).toBe(true);
  expect(await h.counted('retriable_error')).toBe(1);
  expect(await h.counted('authentication_refused')).toBe(0);
  expect((await h.metrics.brokerAuthenticationFailing.get()).values[0]?.value ?? 0).toBe(0);
  expect(h.events.map((e) => e.event)).toEqual(['kafka.consumer.restarting']);
});

test('a wait for a restart gives way once the replica stops', async () => {
  const h = harness(() => new Promise<void>(() => undefined));
  expect(h.restart.onCrash(coordinatorNotFound())).toBe(true);
  await jest.advanceTimersByTimeAsync(2_000);
  let gaveWay = false;
  const waiting = Promise.race([h.restart.settled(), h.restart.stopped]).then(() => (gaveWay = true));
  await jest.advanceTimersByTimeAsync(10);
  expect(gaveWay).toBe(false);
  h.restart.stop();
  await waiting;
  expect(gaveWay).toBe(true);
});

/**
 * kafkajs restarts a crashed consumer from a timer of its own unless restartOnFailure says
 * no; that start could not be waited for, and a stop during its join left its runner
 * fetching. With the consumer's retry the replica uses, a real kafkajs consumer whose
 * broker is unreachable crashes and is not restarted by kafkajs; with kafkajs's default it is.
 */
test.each([
  { label: 'the replica’s retry', retry: CONSUMER_RETRY, expected: false },
  { label: 'kafkajs’s default retry', retry: { retries: 5 }, expected: true },
])(
  'a real kafkajs consumer with $label: restarted by kafkajs itself after a crash: $expected',
  async ({ retry, expected }) => {
    jest.useRealTimers();
    const kafka = new Kafka({
      brokers: ['127.0.0.1:1'],
      logLevel: logLevel.NOTHING,
      retry: { retries: 0, initialRetryTime: 10 },
    });
    const consumer = kafka.consumer({ groupId: 'never-joins', retry });
    const crashes: boolean[] = [];
    consumer.on(consumer.events.CRASH, (event) => void crashes.push(event.payload.restart));
    try {
      await consumer.run({ eachBatch: () => Promise.resolve() });
      expect(crashes).toEqual([expected]);
    } finally {
      await consumer.disconnect();
    }
  },
);
