import { CorruptCompressedBatchError, FetchExpansion } from '../../../src/kafka/protocol/compression';
import {
  corruptPartition,
  sizedWithinBudget,
  heldRecords,
  type FetchRequest,
  type FetchResponse,
} from '../../../src/kafka/protocol/coordinator-hook';
import { FetchingBrokers } from '../../../src/kafka/protocol/fetching-brokers';

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

describe('a fetch scaled below one batch does not starve the later partitions', () => {
  const compressing = () => {
    const expansion = new FetchExpansion();
    expansion.answered(true);
    expansion.observe(1, 100); // a topic that compresses 100x: sizes far below one batch
    return expansion;
  };
  const first = (r: FetchRequest) => `${r.topics[0]!.topic}${r.topics[0]!.partitions[0]!.partition}`;

  test('every partition comes first (the only one the broker answers over the limit) in turn', () => {
    const expansion = compressing();
    const firsts = [0, 1, 2, 3, 4].map((n) => first(sizedWithinBudget(request, expansion, n)));
    expect(firsts).toEqual(['a0', 'a1', 'b0', 'b1', 'a0']);
  });

  test('a rotated request still asks for every partition once, at the scaled size', () => {
    const scaled = sizedWithinBudget(request, compressing(), 1);
    const asked = scaled.topics.flatMap((t) => t.partitions.map((p) => `${t.topic}${p.partition}`)).sort();
    expect(asked).toEqual(['a0', 'a1', 'b0', 'b1']);
    expect(scaled.topics.every((t) => t.partitions.every((p) => p.maxBytes! < 4 * 1024 * 1024))).toBe(true);
  });

  test('an uncompressed topic is fetched as kafkajs asks', () => {
    const expansion = new FetchExpansion();
    expansion.answered(true);
    expect(sizedWithinBudget(request, expansion, 3)).toBe(request);
  });
});

test('only an answer that brought records ends the first-fetch guard (an empty answer says nothing of the next)', () => {
  const empty: FetchResponse = {
    responses: [{ topicName: 'a', partitions: [{ partition: 0, messages: [] }, { partition: 1 }] }],
  };
  expect(heldRecords(empty)).toBe(false);
  expect(heldRecords({ responses: [] })).toBe(false);
  const one = { offset: '7' } as unknown as NonNullable<
    FetchResponse['responses'][number]['partitions'][number]['messages']
  >[number];
  expect(
    heldRecords({
      responses: [...empty.responses, { topicName: 'b', partitions: [{ partition: 1, messages: [one] }] }],
    }),
  ).toBe(true);
});

describe('a consumer fetching from several brokers at once holds about one fetch in all', () => {
  const known = () => {
    const expansion = new FetchExpansion();
    expansion.answered(true);
    return expansion;
  };

  test('three brokers: each fetch asks for a third, in all and per partition', () => {
    const shared = sizedWithinBudget(request, known(), 0, 3);
    expect(shared.maxBytes).toBe(Math.floor((10 * 1024 * 1024) / 3));
    for (const t of shared.topics)
      for (const p of t.partitions) expect(p.maxBytes).toBe(Math.floor((4 * 1024 * 1024) / 3));
  });

  test('shared and compressed: the two divide together, never below the floors', () => {
    const expansion = known();
    expansion.observe(1, 4);
    const shared = sizedWithinBudget(request, expansion, 0, 2);
    expect(shared.maxBytes).toBe(Math.floor((10 * 1024 * 1024) / 2 / 4));
    const many = sizedWithinBudget(request, expansion, 0, 1_000);
    expect(many.maxBytes).toBe(256 * 1024);
    for (const t of many.topics) for (const p of t.partitions) expect(p.maxBytes).toBe(64 * 1024);
  });
});

describe('the brokers a consumer fetches from at once', () => {
  test('count while they fetched within the window, and each change is told once', () => {
    const told: number[] = [];
    const fetching = new FetchingBrokers((n) => told.push(n), 10_000);
    const [a, b, c] = [{}, {}, {}];
    expect(fetching.begin(a, 0)).toBe(1);
    expect(fetching.begin(b, 100)).toBe(2);
    expect(fetching.begin(a, 5_000)).toBe(2);
    expect(fetching.begin(c, 6_000)).toBe(3);
    // b has not fetched for over 10 s: its partitions moved away.
    expect(fetching.begin(a, 10_200)).toBe(2);
    expect(told).toEqual([1, 2, 3, 2]);
  });
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
