import {
  coveredThrough,
  fetchedBatch,
  hideAbortedRecords,
  type AnsweredPartition,
} from '../../../src/kafka/protocol/fetched-batch';

/** A record as kafkajs 2.2.4 decodes it from a record batch (v2) of `first`..`first + delta`. */
function record(
  offset: number,
  batch: { first: number; delta: number; producerId?: string; inTransaction?: boolean; control?: boolean },
  key: Buffer | null = null,
) {
  return {
    offset: String(offset),
    key,
    value: Buffer.from('{}'),
    headers: {},
    isControlRecord: batch.control ?? false,
    batchContext: {
      firstOffset: String(batch.first),
      lastOffsetDelta: batch.delta,
      producerId: batch.producerId ?? '-1',
      inTransaction: batch.inTransaction ?? false,
      isControlBatch: batch.control ?? false,
    },
  };
}

type Answered = ReturnType<typeof record> | Omit<ReturnType<typeof record>, 'batchContext'>;
const data = (
  messages: Answered[],
  abortedTransactions: { producerId: string; firstOffset: string }[] = [],
  highWatermark = '1000',
) => ({
  partition: 0,
  highWatermark,
  abortedTransactions,
  messages,
});

describe('how far a fetch moves the position', () => {
  test('a record batch whose last records were compacted away: past its last offset, not its last record', () => {
    // Batch 0..9 kept 0..4; its last offset stays 9.
    const batch = fetchedBatch('t', '0', data([0, 1, 2, 3, 4].map((o) => record(o, { first: 0, delta: 9 }))));
    expect(batch.isEmpty()).toBe(false);
    expect(coveredThrough(batch)).toBe(9);
  });

  test('fetched from inside a compacted tail: every record below the fetch offset, the gap ends with the record batch', () => {
    const batch = fetchedBatch('t', '7', data([0, 1, 2, 3, 4].map((o) => record(o, { first: 0, delta: 9 }))));
    // kafkajs does not call eachBatch for it, and would itself step to offset 8 only.
    expect(batch.isEmpty()).toBe(true);
    expect(coveredThrough(batch)).toBe(9);
  });

  test('an aborted transaction and its marker: nothing deliverable, covered through the marker', () => {
    const aborted = Array.from({ length: 5 }, (_, i) =>
      record(10 + i, { first: 10, delta: 4, producerId: '7', inTransaction: true }),
    );
    const marker = record(
      15,
      { first: 15, delta: 0, producerId: '7', inTransaction: true, control: true },
      Buffer.from([0, 0, 0, 0]),
    );
    const batch = fetchedBatch(
      't',
      '10',
      data([...aborted, marker], [{ producerId: '7', firstOffset: '10' }]),
    );
    expect(batch.isEmpty()).toBe(true);
    expect(coveredThrough(batch)).toBe(15);
  });

  test('committed records followed by their commit marker: delivered records, covered through the marker', () => {
    const committed = [20, 21, 22].map((o) =>
      record(o, { first: 20, delta: 2, producerId: '8', inTransaction: true }),
    );
    const marker = record(
      23,
      { first: 23, delta: 0, producerId: '8', inTransaction: true, control: true },
      Buffer.from([0, 0, 0, 1]),
    );
    const batch = fetchedBatch('t', '20', data([...committed, marker]));
    expect(batch.isEmpty()).toBe(false);
    expect(coveredThrough(batch)).toBe(23);
  });

  test("a record read at an offset past its batch (a batch whose lengths lie): the position stops at the batch's end, never over records not read", () => {
    const batch = fetchedBatch(
      't',
      '500',
      data([record(500, { first: 500, delta: 1 }), record(528, { first: 500, delta: 1 })]),
    );
    expect(coveredThrough(batch)).toBe(501);
  });

  test('a fetch with no record at all moves nothing', () => {
    expect(coveredThrough(fetchedBatch('t', '42', data([])))).toBeUndefined();
  });

  test('the legacy message format (no record batch header): the last record', () => {
    const legacy = { offset: '5', key: null, value: Buffer.from('{}'), headers: {}, isControlRecord: false };
    expect(coveredThrough(fetchedBatch('t', '5', data([legacy])))).toBe(5);
  });
});

describe('aborted transactions of several producers on one partition', () => {
  const txn = (offset: number, producerId: string) =>
    record(offset, { first: offset, delta: 0, producerId, inTransaction: true });
  const marker = (offset: number, producerId: string, type: 0 | 1) =>
    record(
      offset,
      { first: offset, delta: 0, producerId, inTransaction: true, control: true },
      Buffer.from([0, 0, 0, type]),
    );
  const delivered = (fetchOffset: number, answer: AnsweredPartition) => {
    hideAbortedRecords(answer);
    const batch = fetchedBatch('t', String(fetchOffset), answer);
    return {
      offsets: batch.messages.map((m) => Number(m.offset)),
      through: coveredThrough(batch),
    };
  };

  test('an aborted-transaction list not in offset order: both aborted transactions are hidden, the committed one kept', () => {
    const answer = data(
      [
        txn(10, '1'),
        txn(11, '1'),
        txn(12, '2'),
        txn(13, '2'),
        txn(14, '3'),
        marker(15, '1', 0),
        marker(16, '2', 0),
        marker(17, '3', 1),
      ],
      [
        { producerId: '2', firstOffset: '12' },
        { producerId: '1', firstOffset: '10' },
      ],
    );
    // kafkajs's own filter lets 10 and 11 through (it waits for offset 12 to start anything).
    expect(delivered(10, answer)).toEqual({ offsets: [14], through: 17 });
  });

  test('two aborted transactions begun before the fetch offset: a record of the second producer first is hidden too', () => {
    const answer = data(
      [txn(8, '2'), txn(9, '1'), txn(10, '4'), marker(11, '1', 0), marker(12, '2', 0), marker(13, '4', 1)],
      [
        { producerId: '1', firstOffset: '5' },
        { producerId: '2', firstOffset: '6' },
      ],
    );
    // kafkajs's own filter starts only producer 1's transaction at offset 8 and delivers 8.
    expect(delivered(8, answer)).toEqual({ offsets: [10], through: 13 });
  });

  test("a producer's records after its abort marker are delivered again", () => {
    const answer = data(
      [txn(0, '1'), marker(1, '1', 0), txn(2, '1'), marker(3, '1', 1)],
      [{ producerId: '1', firstOffset: '0' }],
    );
    expect(delivered(0, answer)).toEqual({ offsets: [2], through: 3 });
  });
});
