import { CorruptCompressedBatchError, FetchExpansion } from '../../../src/kafka/protocol/compression';
import {
  corruptPartition,
  decompressedSized,
  heldRecords,
  type FetchRequest,
  type FetchResponse,
} from '../../../src/kafka/protocol/coordinator-hook';

const partition = (p: number) => ({ partition: p, fetchOffset: '0', maxBytes: 4 * 1024 * 1024 });

/** A request as kafkajs's consumer group sends it: the same partitions in the same order every time. */
const request: FetchRequest = {
  maxWaitTime: 5_000,
  minBytes: 1,
  maxBytes: 10 * 1024 * 1024,
  topics: [
    { topic: 'a', partitions: [partition(0), partition(1)] },
    { topic: 'b', partitions: [partition(0), partition(1)] },
  ],
};

describe('a fetch of a compressed topic is scaled to its decompressed size', () => {
  const compressing = () => {
    const expansion = new FetchExpansion();
    expansion.answered(true);
    expansion.observe(1, 100); // a topic that compresses 100x: sizes far below one batch
    return expansion;
  };

  test('a scaled request still asks for every partition once, in the order asked, at the scaled size', () => {
    const scaled = decompressedSized(request, compressing());
    const asked = scaled.topics.flatMap((t) => t.partitions.map((p) => `${t.topic}${p.partition}`));
    expect(asked).toEqual(['a0', 'a1', 'b0', 'b1']);
    expect(scaled.topics.every((t) => t.partitions.every((p) => p.maxBytes! < 4 * 1024 * 1024))).toBe(true);
    expect(scaled.maxBytes).toBeLessThan(request.maxBytes!);
  });

  test('an uncompressed topic is fetched as kafkajs asks', () => {
    const expansion = new FetchExpansion();
    expansion.answered(true);
    expect(decompressedSized(request, expansion)).toBe(request);
  });
});

test('only an answer that brought records ends the first-fetch guard (an empty answer says nothing of the next)', () => {
  const empty: FetchResponse = {
    responses: [{ topicName: 'a', partitions: [{ partition: 0, messages: [] }, { partition: 1 }] }],
  };
  expect(heldRecords(empty)).toBe(false);
  expect(heldRecords({ responses: [] })).toBe(false);
  type Message = NonNullable<FetchResponse['responses'][number]['partitions'][number]['messages']>[number];
  const marker = { offset: '6', key: null, isControlRecord: true } as Message;
  // A transaction's marker alone measured no batch of data.
  expect(
    heldRecords({ responses: [{ topicName: 'a', partitions: [{ partition: 0, messages: [marker] }] }] }),
  ).toBe(false);
  const one = { offset: '7', key: null, isControlRecord: false } as Message;
  expect(
    heldRecords({
      responses: [...empty.responses, { topicName: 'b', partitions: [{ partition: 1, messages: [one] }] }],
    }),
  ).toBe(true);
});

describe('locating the corrupt batch of a failed fetch', () => {
  test('the partitions fetched alone do not wait for data (idle ones would cost the session)', async () => {
    const sent: FetchRequest[] = [];
    const corrupt = new CorruptCompressedBatchError('zstd', { first: 0, last: 9 }, 'damaged');
    const found = await corruptPartition((r) => {
      sent.push(r);
      const only = r.topics[0]!;
      if (only.topic === 'b' && only.partitions[0]!.partition === 1) return Promise.reject(corrupt);
      return Promise.resolve<FetchResponse>({ responses: [] });
    }, request);
    expect(found).toMatchObject({ topic: 'b', partition: 1, error: corrupt });
    expect(sent.length).toBeGreaterThan(1);
    for (const r of sent) expect(r).toMatchObject({ maxWaitTime: 0, minBytes: 0 });
  });
});
