import { FetchedRecord } from '../../../src/common/fetched-record';
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import fc from 'fast-check';
import { atOrAbove, fastBatchClass } from '../../../src/kafka/protocol/consumer-batch';

/**
 * The consumer's batches built without a Long per record hand eachBatch, and the fetch
 * positions, exactly what kafkajs 2.2.4's own Batch does. The hazards: a record below the
 * fetch offset delivered (a duplicate after a fetch from the middle of a record batch), a
 * control record or an aborted transaction's record delivered, a record dropped, or an
 * offset past 2^53 compared wrongly as a double.
 */

/* eslint-disable @typescript-eslint/no-require-imports -- kafkajs 2.2.4 internals, the reference */
type KafkajsBatch = {
  rawMessages: unknown[];
  messagesWithinOffset: unknown[];
  messages: unknown[];
  fetchedOffset: string;
  topic: string;
  partition: number;
  highWatermark: string;
  isEmpty(): boolean;
  isEmptyIncludingFiltered(): boolean;
  isEmptyControlRecord(): boolean;
  isEmptyDueToLogCompactedMessages(): boolean;
  firstOffset(): string | null;
  lastOffset(): string;
  offsetLag(): string;
  offsetLagLow(): string;
};
type BatchClass = new (topic: string, fetchedOffset: string, partitionData: unknown) => KafkajsBatch;
// kafkajs's own class, also if the module now exports the fast one (its prototype's constructor).
const Batch = (require('kafkajs/src/consumer/batch') as { prototype: { constructor: unknown } }).prototype
  .constructor as BatchClass;
/* eslint-enable @typescript-eslint/no-require-imports */
const FastBatch = fastBatchClass(Batch as unknown as { readonly prototype: KafkajsBatch });

const ABORT_MARKER = Buffer.from([0, 0, 0, 0]);
const COMMIT_MARKER = Buffer.from([0, 0, 0, 1]);

/** What a batch shows of itself: its fields and every method's answer. */
function shown(b: KafkajsBatch) {
  return {
    topic: b.topic,
    partition: b.partition,
    highWatermark: b.highWatermark,
    fetchedOffset: b.fetchedOffset,
    rawMessages: b.rawMessages,
    messagesWithinOffset: b.messagesWithinOffset,
    messages: b.messages,
    isEmpty: b.isEmpty(),
    isEmptyIncludingFiltered: b.isEmptyIncludingFiltered(),
    isEmptyControlRecord: b.isEmptyControlRecord(),
    isEmptyDueToLogCompactedMessages: b.isEmptyDueToLogCompactedMessages(),
    firstOffset: b.firstOffset(),
    lastOffset: b.lastOffset(),
    offsetLag: b.offsetLag(),
    offsetLagLow: b.offsetLagLow(),
  };
}

/** A fetch's partition: records at increasing offsets (gaps, as compaction leaves), some in transactions. */
const partitionData = fc
  .record({
    base: fc.oneof(
      fc.bigInt(0n, 1000n),
      fc.bigInt(2n ** 53n - 20n, 2n ** 53n + 20n),
      fc.bigInt(2n ** 62n, 2n ** 62n + 5n),
    ),
    records: fc.array(
      fc.record({
        gap: fc.bigInt(1n, 3n),
        producer: fc.constantFrom('1', '2'),
        inTransaction: fc.boolean(),
        control: fc.constantFrom('no', 'no', 'no', 'abort', 'commit'),
        // Read in place (record-batch.ts): its offset a number, its string a getter.
        inPlace: fc.boolean(),
      }),
      { maxLength: 25 },
    ),
    fetchedShift: fc.bigInt(-3n, 30n),
    aborted: fc.array(fc.record({ producer: fc.constantFrom('1', '2'), at: fc.nat(25) }), { maxLength: 3 }),
  })
  .map(({ base, records, fetchedShift, aborted }) => {
    let offset = base;
    const messages = records.map((r) => {
      offset += r.gap;
      const control = r.control !== 'no';
      const key = r.control === 'abort' ? ABORT_MARKER : r.control === 'commit' ? COMMIT_MARKER : null;
      const value = control ? null : Buffer.from(offset.toString());
      const batchContext = { producerId: r.producer, inTransaction: r.inTransaction || control };
      if (r.inPlace && offset <= BigInt(Number.MAX_SAFE_INTEGER))
        return new FetchedRecord(2, 0, Number(offset), 0, key, value, {}, control, batchContext);
      return { offset: offset.toString(), key, value, isControlRecord: control, batchContext };
    });
    const abortedTransactions = aborted
      .map((a) => ({ producerId: a.producer, firstOffset: (base + BigInt(a.at)).toString() }))
      .sort((x, y) => (BigInt(x.firstOffset) < BigInt(y.firstOffset) ? -1 : 1));
    return {
      fetchedOffset: (base + fetchedShift < 0n ? 0n : base + fetchedShift).toString(),
      data: {
        partition: 3,
        highWatermark: (offset + 1n).toString(),
        messages,
        abortedTransactions: abortedTransactions.length > 0 ? abortedTransactions : null,
      },
    };
  });

test('a batch built without Longs shows what kafkajs’s own Batch shows, for every fetch', () => {
  fc.assert(
    fc.property(partitionData, ({ fetchedOffset, data }) => {
      const fast = new FastBatch('orders', fetchedOffset, data);
      const kafkajs = new Batch('orders', fetchedOffset, data);
      expect(shown(fast)).toEqual(shown(kafkajs));
      expect(fast).toBeInstanceOf(Batch);
    }),
    { numRuns: 2000 },
  );
});

test('a fetch with nothing to drop hands on its record array as it came, without a copy', () => {
  const messages = [
    { offset: '7', isControlRecord: false, batchContext: { producerId: '-1', inTransaction: false } },
    { offset: '8', isControlRecord: false, batchContext: { producerId: '-1', inTransaction: false } },
  ];
  const fast = new FastBatch('orders', '7', { partition: 0, highWatermark: '9', messages });
  expect(fast.messagesWithinOffset).toBe(messages);
  expect(fast.messages).toBe(messages);
});

test('offsets compare exactly where a double cannot tell them apart', () => {
  // 2^53 + 1 is read as 2^53 by Number: the comparison must fall back to exact integers.
  expect(atOrAbove('9007199254740992', '9007199254740993')).toBe(false);
  expect(atOrAbove('9007199254740993', '9007199254740992')).toBe(true);
  expect(atOrAbove('9007199254740993', '9007199254740993')).toBe(true);
  expect(atOrAbove('41', '42')).toBe(false);
  expect(atOrAbove('42', '42')).toBe(true);
});

describe('installFastBatch', () => {
  const root = path.resolve(__dirname, '../../..');
  /**
   * In a plain node process on the build, after `first` is loaded: whether the module says
   * it is installed, and whether kafkajs's Batch module exports a class that is not
   * kafkajs's own (the fast class's prototype is kafkajs's, whose constructor is).
   */
  const afterLoading = (first: string): unknown =>
    JSON.parse(
      execFileSync(
        process.execPath,
        [
          '-e',
          `require(${JSON.stringify(first)});
           const m = require('./dist/src/kafka/protocol/consumer-batch.js');
           const B = require('kafkajs/src/consumer/batch');
           process.stdout.write(JSON.stringify({
             installed: m.FAST_BATCH_INSTALLED,
             used: B !== B.prototype.constructor,
           }));`,
        ],
        { cwd: root },
      ).toString(),
    );

  it('is in place once the command line is loaded, so kafkajs’s consumer group builds fast batches', () => {
    expect(afterLoading('./dist/src/cli/main.js')).toEqual({ installed: true, used: true });
  });

  it('is in place once the library entry is loaded', () => {
    expect(afterLoading('./dist/src/index.js')).toEqual({ installed: true, used: true });
  });

  it('says it is not in place when kafkajs was loaded first, and leaves kafkajs’s Batch as it is', () => {
    expect(afterLoading('kafkajs')).toEqual({ installed: false, used: false });
  });
});
