import type { KafkaMessage, TopicPartitions } from 'kafkajs';
import { DeadLetterWriteError } from '../../src/common/errors';
import { createLogger } from '../../src/common/logger';
import type { DeadLetterVerdict } from '../../src/dead-letters/dead-letter-reason';
import type { DeadLetter, DeadLetterSink } from '../../src/dead-letters/dead-letter';
import { DeadLetterOutbox, type ErrorHandling } from '../../src/dead-letters/dead-letter-outbox';
import { MIN_JUDGED_RECORDS } from '../../src/dead-letters/dead-letter-window';
import { pauseStopped } from '../../src/kafka/join-claims';
import { Metrics } from '../../src/metrics/metrics';

/** An outbox wired to recording fakes of the consumer (pause) and the offset tracker (hold, resolved). */
function harness(sink: DeadLetterSink, errors: Partial<ErrorHandling> = {}) {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger(
    { level: 'info' },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  const metrics = new Metrics();
  const calls = {
    paused: [] as [string, number][],
    held: [] as [string, number, number][],
    resolved: [] as [string, number, number[]][],
  };
  const outbox = new DeadLetterOutbox({
    sink,
    errors: {
      tolerance: 'all',
      maxDeadLetterRatio: 0.5,
      window: 1_000,
      retryTimeoutMs: 60_000,
      retryDelayMaxMs: 10_000,
      ...errors,
    },
    logger,
    metrics,
    pause: (t, p) => calls.paused.push([t, p]),
    hold: (t, p, o) => calls.held.push([t, p, o]),
    resolved: (t, p, offsets) => calls.resolved.push([t, p, [...offsets]]),
    closeGraceMs: 50,
    retryDelayMs: 5,
  });
  const stoppedGauge = async () => (await metrics.partitionStopped.get()).values;
  return { outbox, lines, calls, stoppedGauge };
}

const message = (offset: number, value: Buffer | null = Buffer.from(`v${offset}`)): KafkaMessage => ({
  offset: String(offset),
  // Unpooled (Buffer.alloc), as a fetch response is: the copy test compares backing stores.
  key: Buffer.alloc(1, 0x6b),
  value,
  timestamp: '1700000000000',
  attributes: 0,
  headers: { h: Buffer.alloc(1, 0x78) },
});
const messages = (from: number, n: number) => Array.from({ length: n }, (_, i) => message(from + i));
const verdict = (offset: number, field = 'svc'): DeadLetterVerdict => ({
  offset,
  reason: 'schema-mismatch',
  detail: `field "${field}": expected string (required), got null`,
  field,
});

class FakeSink implements DeadLetterSink {
  readonly description = 'fake sink';
  readonly written: DeadLetter[] = [];
  attempts = 0;
  constructor(readonly behaviour: (attempt: number) => Promise<void>) {}
  async write(letters: readonly DeadLetter[]): Promise<void> {
    this.attempts += 1;
    await this.behaviour(this.attempts);
    this.written.push(...letters);
  }
  async close(): Promise<void> {}
}
const ok = () => new FakeSink(() => Promise.resolve());
const failing = (retriable: boolean) =>
  new FakeSink(() =>
    Promise.reject(
      new DeadLetterWriteError('fake sink', retriable ? 'broker away' : 'MESSAGE_TOO_LARGE', {
        retriable,
        cause: undefined,
      }),
    ),
  );

describe('dead-letter outbox', () => {
  test('a dead letter no retry can write stops its partition at once: paused, commits held at its offset, gauge, error log', async () => {
    const sink = failing(false);
    const { outbox, calls, lines, stoppedGauge } = harness(sink);
    await outbox.deliver(outbox.take('t', 3, messages(10, 3), [verdict(11)]));
    expect(sink.attempts).toBe(1);
    expect(calls.paused).toEqual([['t', 3]]);
    expect(calls.held).toEqual([['t', 3, 11]]);
    expect(calls.resolved).toEqual([]);
    expect(outbox.isStopped('t', 3)).toBe(true);
    expect(await stoppedGauge()).toEqual([
      { labels: { topic: 't', partition: '3', reason: 'dead-letter-write-failed' }, value: 1 },
    ]);
    const stop = lines.find((l) => l.event === 'partition.stopped')!;
    expect(stop).toMatchObject({ level: 50, topic: 't', partition: 3, offset: 11, sink: 'fake sink' });
    expect(String(stop.msg)).toContain('MESSAGE_TOO_LARGE');
    // Later batches of the stopped partition are not written (their offsets stay pending).
    expect(outbox.take('t', 3, messages(13, 2), [verdict(14)])).toBeUndefined();
  });

  test('transient failures are retried until errors.retryTimeoutMs, then the partition stops', async () => {
    const sink = failing(true);
    const { outbox, calls } = harness(sink, { retryTimeoutMs: 200 });
    const started = Date.now();
    await outbox.deliver(outbox.take('t', 0, messages(0, 1), [verdict(0)]));
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(sink.attempts).toBeGreaterThan(2);
    expect(calls.held).toEqual([['t', 0, 0]]);
  });

  test('a transient failure that clears is retried and resolves the offsets', async () => {
    const sink = new FakeSink((attempt) =>
      attempt < 3
        ? Promise.reject(new DeadLetterWriteError('fake sink', 'away', { retriable: true, cause: undefined }))
        : Promise.resolve(),
    );
    const { outbox, calls } = harness(sink);
    await outbox.deliver(outbox.take('t', 0, messages(0, 2), [verdict(1)]));
    expect(calls.resolved).toEqual([['t', 0, [1]]]);
    expect(calls.paused).toEqual([]);
    expect(outbox.delivered).toBe(1);
  });

  test('close() ends a retrying delivery at once, so stop() does not hang on a DLQ that is down', async () => {
    const { outbox, calls } = harness(failing(true));
    const delivery = outbox.deliver(outbox.take('t', 0, messages(0, 1), [verdict(0)]));
    await new Promise((r) => setTimeout(r, 30));
    const started = Date.now();
    outbox.close();
    await delivery;
    expect(Date.now() - started).toBeLessThan(500);
    expect(calls.resolved).toEqual([]); // not written: stays uncommitted
    expect(calls.paused).toEqual([]); // stopping the replica is no reason to report a stopped partition
  });

  test('close() gives up on a write that never answers after its grace', async () => {
    const { outbox } = harness(new FakeSink(() => new Promise<void>(() => undefined)));
    const delivery = outbox.deliver(outbox.take('t', 0, messages(0, 1), [verdict(0)]));
    outbox.close();
    const started = Date.now();
    await delivery;
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  test('letters are copies: they do not keep the kafkajs fetch buffers alive', () => {
    const { outbox } = harness(ok());
    const fetched = Buffer.alloc(1024, 0x61);
    const m = { ...message(5), value: fetched.subarray(100, 110) };
    const out = outbox.take('t', 0, [m], [verdict(5)])!;
    const letter = out.letters[0]!;
    expect(letter.value!.equals(m.value)).toBe(true);
    expect(letter.value!.buffer).not.toBe(fetched.buffer);
    expect(letter.key!.buffer).not.toBe(m.key!.buffer);
    expect((letter.headers!.h as Buffer).buffer).not.toBe((m.headers!.h as Buffer).buffer);
  });

  test('a stopped partition stays paused across joins (resumable leaves it out)', async () => {
    const { outbox } = harness(failing(false));
    await outbox.deliver(outbox.take('t', 1, messages(0, 1), [verdict(0)]));
    expect(
      outbox.resumable([
        { topic: 't', partitions: [0, 1, 2] },
        { topic: 'u', partitions: [1] },
      ]),
    ).toEqual([
      { topic: 't', partitions: [0, 2] },
      { topic: 'u', partitions: [1] },
    ]);
  });

  test('a kafkajs consumer restart does not resume a stopped partition: stopping it again pauses it again, and every join pauses it (fake consumer)', async () => {
    const { outbox, calls, lines } = harness(failing(false));
    await outbox.deliver(outbox.take('t', 1, messages(0, 1), [verdict(0)]));
    expect(calls.paused).toEqual([['t', 1]]);
    // kafkajs's restart forgot the pause; the corrupt batch is fetched again and stops it again.
    outbox.stop('t', 1, 0, 'corrupt-record-batch', { message: 'again', fields: {} });
    expect(calls.paused).toEqual([
      ['t', 1],
      ['t', 1],
    ]);
    expect(lines.filter((l) => l.event === 'partition.stopped')).toHaveLength(1); // reported once

    // The join after the restart pauses it before any fetch (a fake consumer whose pauses were lost).
    const consumer = {
      paused: [] as TopicPartitions[],
      pause: (tps: TopicPartitions[]) => void consumer.paused.push(...tps),
    };
    pauseStopped(consumer, outbox, { t: [0, 1, 2], u: [1] });
    expect(consumer.paused).toEqual([{ topic: 't', partitions: [1] }]);
    pauseStopped(consumer, outbox, { t: [0, 2] }); // not assigned here: nothing to pause
    expect(consumer.paused).toHaveLength(1);
  });

  test('more than maxDeadLetterRatio of the last `window` records stops the partition at the oldest dead letter in the window, naming the most common reason and field', async () => {
    const sink = ok();
    const { outbox, calls, lines, stoppedGauge } = harness(sink, {
      tolerance: 'ratio',
      window: 10,
      maxDeadLetterRatio: 0.5,
    });
    // 10 good records, then a batch where every record misses "svc" except one missing "level".
    await outbox.deliver(outbox.take('t', 0, messages(0, 10), []));
    const bad = [verdict(10), verdict(11, 'level'), ...[12, 13, 14, 15, 16, 17].map((o) => verdict(o))];
    expect(outbox.take('t', 0, messages(10, 10), bad)).toBeUndefined();
    expect(sink.written).toEqual([]); // the batch that tripped is not written
    expect(calls.held).toEqual([['t', 0, 10]]);
    expect(calls.paused).toEqual([['t', 0]]);
    const stop = lines.find((l) => l.event === 'partition.stopped')!;
    expect(stop).toMatchObject({
      reason: 'dead-letter-ratio-exceeded',
      offset: 10,
      commonReason: 'schema-mismatch',
      commonField: 'svc',
      deadLetters: 6,
      records: 10,
    });
    expect(String(stop.msg)).toContain('field "svc"');
    expect((await stoppedGauge())[0]!.labels.reason).toBe('dead-letter-ratio-exceeded');
  });

  test('a share at or under the ratio, or a window not yet full, keeps going', async () => {
    const { outbox, calls } = harness(ok(), { tolerance: 'ratio', window: 10, maxDeadLetterRatio: 0.5 });
    // Five of the first five are bad: the window is not full yet.
    await outbox.deliver(
      outbox.take(
        't',
        0,
        messages(0, 5),
        [0, 1, 2, 3, 4].map((o) => verdict(o)),
      ),
    );
    expect(calls.paused).toEqual([]);
    // Five of ten: not more than half.
    await outbox.deliver(outbox.take('t', 0, messages(5, 5), []));
    // Sliding on: the old bad ones leave the window as bad ones come in.
    await outbox.deliver(
      outbox.take(
        't',
        0,
        messages(10, 4),
        [10, 11].map((o) => verdict(o)),
      ),
    );
    expect(calls.paused).toEqual([]);
    expect(outbox.delivered).toBe(7);
  });

  test(`a definition matching nothing on a partition smaller than its window stops it at the ${MIN_JUDGED_RECORDS}th record, not after dead-lettering every record`, async () => {
    const sink = ok();
    const { outbox, calls, lines } = harness(sink, {
      tolerance: 'ratio',
      window: 1_000,
      maxDeadLetterRatio: 0.5,
    });
    // ~833 records per partition, all dead letters, in batches of 50.
    let stopped: number | undefined;
    for (let from = 0; from < 833 && stopped === undefined; from += 50) {
      const batch = messages(from, Math.min(50, 833 - from));
      const taken = outbox.take(
        't',
        0,
        batch,
        batch.map((m) => verdict(Number(m.offset))),
      );
      if (taken === undefined) stopped = from;
      else await outbox.deliver(taken);
    }
    expect(stopped).toBe(MIN_JUDGED_RECORDS - 50);
    expect(calls.paused).toEqual([['t', 0]]);
    expect(sink.written).toHaveLength(MIN_JUDGED_RECORDS - 50);
    expect(lines.find((l) => l.event === 'partition.stopped')).toMatchObject({
      reason: 'dead-letter-ratio-exceeded',
      offset: 0,
      deadLetters: MIN_JUDGED_RECORDS,
      records: MIN_JUDGED_RECORDS,
    });
  });

  test('a definition matching nothing on many partitions each smaller than the judged minimum stops them, not after dead-lettering every record of each', async () => {
    const sink = ok();
    const { outbox, calls } = harness(sink, { tolerance: 'ratio', window: 1_000, maxDeadLetterRatio: 0.5 });
    const partitions = 200;
    const perPartition = MIN_JUDGED_RECORDS - 20;
    for (let p = 0; p < partitions; p++) {
      const batch = messages(0, perPartition);
      const taken = outbox.take(
        't',
        p,
        batch,
        batch.map((m) => verdict(Number(m.offset))),
      );
      if (taken !== undefined) await outbox.deliver(taken);
    }
    // Without the replica-wide judgement no partition ever reaches its own minimum, and all
    // 200 × 80 dead letters would be written and committed.
    expect(calls.paused.length).toBeGreaterThan(partitions / 2);
    expect(sink.written.length).toBeLessThan(partitions * perPartition);
  });

  test('a bad first record, with good ones after it, does not stop a partition whose window is filling', async () => {
    const { outbox, calls } = harness(ok(), { tolerance: 'ratio', window: 1_000, maxDeadLetterRatio: 0.5 });
    await outbox.deliver(outbox.take('t', 0, messages(0, 1), [verdict(0)]));
    await outbox.deliver(outbox.take('t', 0, messages(1, 2 * MIN_JUDGED_RECORDS), []));
    expect(calls.paused).toEqual([]);
  });

  test("tolerance 'all' never stops; 'none' stops at the first dead letter", async () => {
    const all = harness(ok(), { tolerance: 'all', window: 2 });
    const everything = messages(0, 100);
    await all.outbox.deliver(
      all.outbox.take(
        't',
        0,
        everything,
        everything.map((m) => verdict(Number(m.offset))),
      ),
    );
    expect(all.calls.paused).toEqual([]);
    expect(all.outbox.delivered).toBe(100);

    const none = harness(ok(), { tolerance: 'none' });
    expect(none.outbox.take('t', 0, messages(0, 5), [verdict(3)])).toBeUndefined();
    expect(none.calls.held).toEqual([['t', 0, 3]]);
  });
});
