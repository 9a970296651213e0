import type { Consumer } from 'kafkajs';
import { createLogger } from '../../src/common/logger';
import type { DeadLetterOutbox } from '../../src/dead-letters/dead-letter-outbox';
import { CorruptCompressedBatchError } from '../../src/kafka/protocol/compression';
import { FetchPositions, type FetchPositionsDeps } from '../../src/kafka/fetch-positions';
import type { FetchedBatch } from '../../src/kafka/protocol/fetched-batch';
import { IngestionMetrics } from '../../src/kafka/ingestion-events';
import type { LogBounds } from '../../src/kafka/partition-offsets';
import { Metrics } from '../../src/metrics/metrics';

/** FetchPositions with recording fakes of the consumer and of what the ingestion hands it. */
function harness(bounds: LogBounds) {
  const metrics = new Metrics();
  const calls = { paused: 0, resumed: 0, seeks: [] as string[], stopped: [] as number[] };
  const consumer = {
    pause: () => void calls.paused++,
    resume: () => void calls.resumed++,
    seek: ({ offset }: { offset: string }) => void calls.seeks.push(offset),
  } as unknown as Consumer;
  const owned = { now: true };
  const state = { epoch: 1 };
  const deps: FetchPositionsDeps = {
    epoch: () => state.epoch,
    stopping: () => false,
    tracker: { owns: () => owned.now },
    topicIds: { assertCurrent: () => undefined },
    offsets: { bounds: () => Promise.resolve([bounds]) },
    logger: createLogger({ level: 'silent' }),
    events: new IngestionMetrics(metrics),
    diskPressure: { full: false },
    pool: { admit: () => Promise.reject(new Error('no batch is admitted in these tests')) },
    track: () => undefined,
  };
  const outbox = {
    isStopped: () => false,
    stop: (_t: string, _p: number, offset: number) => void calls.stopped.push(offset),
  } as unknown as DeadLetterOutbox;
  const positions = new FetchPositions(deps, consumer, outbox);
  const aheadOfLog = async () => (await metrics.offsetsAheadOfLog.get()).values.map((v) => v.value);
  return { positions, calls, aheadOfLog, owned, state };
}

/** A fetch answer of one partition with no deliverable record (nothing past the log end yet). */
const answered = (fetchedOffset: number) =>
  ({
    topic: 't',
    partition: 0,
    fetchedOffset: String(fetchedOffset),
    rawMessages: [],
    messagesWithinOffset: [],
    messages: [],
    isEmpty: () => true,
  }) as FetchedBatch;

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

describe('the ahead-of-log gauge of a partition whose log caught up', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  test('goes back to 0 when the partition is next answered from its position', async () => {
    const { positions, aheadOfLog } = harness({ low: 0, high: 90 });
    positions.claimed('t', 0, 1, 100);
    await positions.onOffsetOutOfRange('t', 0, 100);
    expect(await aheadOfLog()).toEqual([10]);
    positions.onFetched([answered(100)]);
    expect(await aheadOfLog()).toEqual([0]);
  });

  test('goes back to 0 when the bounds read after another out-of-range answer contain the position', async () => {
    const bounds = { low: 0, high: 90 };
    const { positions, aheadOfLog } = harness(bounds);
    positions.claimed('t', 0, 1, 100);
    await positions.onOffsetOutOfRange('t', 0, 100);
    bounds.high = 120;
    await positions.onOffsetOutOfRange('t', 0, 100);
    expect(await aheadOfLog()).toEqual([0]);
  });

  test('stays while only a stale fetch (another position) is answered', async () => {
    const { positions, aheadOfLog } = harness({ low: 0, high: 90 });
    positions.claimed('t', 0, 1, 100);
    await positions.onOffsetOutOfRange('t', 0, 100);
    positions.onFetched([answered(50)]);
    expect(await aheadOfLog()).toEqual([10]);
  });
});

describe('a corrupt batch stops only the partition this epoch is consuming, at its position', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());
  const corrupt = new CorruptCompressedBatchError('zstd', { first: 40, last: 49 }, 'damaged');

  test("fetched from this epoch's position: the partition stops there", () => {
    const { positions, calls } = harness({ low: 0, high: 90 });
    positions.claimed('t', 0, 1, 40);
    positions.onCorruptBatch('t', 0, 40, corrupt);
    expect(calls.stopped).toEqual([40]);
  });

  test("fetched from a stale position: no stop, the consumer is sought to this epoch's position", () => {
    const { positions, calls } = harness({ low: 0, high: 90 });
    positions.claimed('t', 0, 1, 60);
    positions.onCorruptBatch('t', 0, 40, corrupt);
    expect(calls.stopped).toEqual([]);
    expect(calls.seeks).toEqual(['60']);
  });

  test('of a partition not owned now (or claimed in an older epoch): no stop, it waits and is fetched again', () => {
    const { positions, calls, owned, state } = harness({ low: 0, high: 90 });
    positions.claimed('t', 0, 1, 40);
    owned.now = false;
    positions.onCorruptBatch('t', 0, 40, corrupt);
    owned.now = true;
    state.epoch = 2;
    positions.onCorruptBatch('t', 0, 40, corrupt);
    expect(calls.stopped).toEqual([]);
    expect(calls.paused).toBe(2);
    jest.advanceTimersByTime(1_000);
    expect(calls.resumed).toBe(2);
  });
});
