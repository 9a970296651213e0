import { CorruptCompressedBatchError, FetchExpansion } from '../../../src/kafka/protocol/compression';
import {
  corruptPartition,
  sizedWithinBudget,
  heldRecords,
  type FetchRequest,
  type FetchResponse,
} from '../../../src/kafka/protocol/coordinator-hook';
import { FetchBudget } from '../../../src/kafka/protocol/fetch-budget';

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

describe('a consumer fetching from several brokers at once holds about one fetch in all', () => {
  const MiB = 1024 * 1024;
  const BUDGET = 16 * MiB;
  const FLOOR = 256 * 1024;

  test("a request is cut to its broker's part of the budget, in all and per partition", () => {
    const known = new FetchExpansion();
    known.answered(true);
    const shared = sizedWithinBudget(request, known, 0, 3 * MiB);
    expect(shared.maxBytes).toBe(3 * MiB);
    for (const t of shared.topics) for (const p of t.partitions) expect(p.maxBytes).toBe(3 * MiB);
    expect(sizedWithinBudget(request, known, 0, 64 * MiB)).toBe(request);
  });

  test('at start, three brokers with nothing known ask for one budget in all, not three', () => {
    const budget = new FetchBudget();
    const asks = [1, 2, 3].map((node) => budget.begin(node, BUDGET, FLOOR, 0));
    expect(asks).toEqual([BUDGET, FLOOR, FLOOR]);
  });

  test('three brokers with backlogs grow to equal shares, never holding much more than the budget', () => {
    const budget = new FetchBudget();
    let most = 0;
    const asked = new Map<number, number>();
    for (let round = 0; round < 12; round++) {
      for (const node of [1, 2, 3]) {
        asked.set(node, budget.begin(node, BUDGET, FLOOR, round * 100));
        // Held at once: the fetches in flight and the answers not yet handled, bounded by the asks.
        most = Math.max(
          most,
          [...asked.values()].reduce((a, b) => a + b, 0),
        );
        budget.answered(node, asked.get(node)!);
      }
    }
    for (const node of [1, 2, 3]) expect(asked.get(node)).toBe(Math.floor(BUDGET / 3));
    expect(most).toBeLessThanOrEqual(BUDGET + 2 * FLOOR);
  });

  test('a broker whose partitions are caught up (empty answers) takes no share from one with a backlog', () => {
    const budget = new FetchBudget();
    budget.begin('idle', BUDGET, FLOOR, 0);
    budget.answered('idle', 0);
    budget.begin('busy', BUDGET, FLOOR, 0);
    budget.answered('busy', 10 * MiB);
    expect(budget.begin('idle', BUDGET, FLOOR, 1)).toBe(FLOOR);
    expect(budget.begin('busy', BUDGET, FLOOR, 1)).toBe(BUDGET - FLOOR);
  });

  test('an answer held behind a slow batch keeps the other brokers small until its broker fetches again', () => {
    const budget = new FetchBudget();
    budget.begin(1, BUDGET, FLOOR, 0);
    budget.answered(1, BUDGET);
    expect(budget.begin(2, BUDGET, FLOOR, 20_000)).toBe(FLOOR);
    budget.answered(2, 4 * MiB);
    // Broker 1 handled its answer: its next fetch begins and releases it.
    budget.begin(1, BUDGET, FLOOR, 21_000);
    budget.failed(1);
    expect(budget.begin(2, BUDGET, FLOOR, 22_000)).toBe(8 * MiB);
  });

  test('a broker that stopped fetching (its partitions moved away) is forgotten after a minute, and the count is told', () => {
    const told: number[] = [];
    const budget = new FetchBudget((n) => told.push(n));
    budget.begin(1, BUDGET, FLOOR, 0);
    budget.answered(1, MiB);
    budget.begin(2, BUDGET, FLOOR, 0);
    budget.answered(2, MiB);
    budget.begin(2, BUDGET, FLOOR, 30_000);
    budget.answered(2, MiB);
    budget.begin(2, BUDGET, FLOOR, 61_000);
    expect(told).toEqual([1, 2, 1]);
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
