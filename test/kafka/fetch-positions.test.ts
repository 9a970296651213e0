import type { Consumer } from 'kafkajs';
import { createLogger } from '../../src/common/logger';
import type { DeadLetterOutbox } from '../../src/dead-letters/dead-letter-outbox';
import { FetchPositions } from '../../src/kafka/fetch-positions';
import type { IngestionState } from '../../src/kafka/ingestion-state';
import type { LogBounds } from '../../src/kafka/partition-offsets';
import { Metrics } from '../../src/metrics/metrics';

/** FetchPositions with recording fakes of the consumer and of the ingestion's shared state. */
function harness(bounds: LogBounds) {
  const metrics = new Metrics();
  const calls = { paused: 0, resumed: 0, seeks: [] as string[] };
  const consumer = {
    pause: () => void calls.paused++,
    resume: () => void calls.resumed++,
    seek: ({ offset }: { offset: string }) => void calls.seeks.push(offset),
  } as unknown as Consumer;
  const state = {
    epoch: 1,
    stopping: false,
    tracker: { owns: () => true },
    topicIds: { assertCurrent: () => undefined },
    offsets: { bounds: () => Promise.resolve([bounds]) },
    options: {
      logger: createLogger({ level: 'silent' }),
      metrics,
      diskPressure: { full: false },
    },
  } as unknown as IngestionState;
  const outbox = { isStopped: () => false } as unknown as DeadLetterOutbox;
  const positions = new FetchPositions(state, consumer, outbox);
  const aheadOfLog = async () => (await metrics.offsetsAheadOfLog.get()).values.map((v) => v.value);
  return { positions, calls, aheadOfLog };
}

describe('an out-of-range answer for a partition', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  test('that its log bounds then contradict (the position is inside them) shows nothing ahead of the log and is fetched again within a second', async () => {
    const { positions, calls, aheadOfLog } = harness({ low: 0, high: 150 });
    positions.claimed('t', 0, 1, 100);
    await positions.onOffsetOutOfRange('t', 0, 100);
    expect(await aheadOfLog()).toEqual([]);
    expect(calls.paused).toBe(1);
    jest.advanceTimersByTime(1_000);
    expect(calls.resumed).toBe(1);
  });

  test('beyond the log end shows by how much, and the partition waits', async () => {
    const { positions, calls, aheadOfLog } = harness({ low: 0, high: 90 });
    positions.claimed('t', 0, 1, 100);
    await positions.onOffsetOutOfRange('t', 0, 100);
    expect(await aheadOfLog()).toEqual([10]);
    jest.advanceTimersByTime(1_000);
    expect(calls.resumed).toBe(0);
  });
});
