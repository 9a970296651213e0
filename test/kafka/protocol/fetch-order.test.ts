import type { FetchRequest, FetchResponse } from '../../../src/kafka/protocol/coordinator-hook';
import { FetchOrder } from '../../../src/kafka/protocol/fetch-order';
import { unshuffledFetch } from '../../../src/kafka/protocol/unshuffled-fetch';

/**
 * A broker's log as a fetch reads it (KIP-74, as Kafka's ReplicaManager fills an answer):
 * partitions in the order asked, each up to its own limit and what is left of the
 * fetch's; a batch larger than both is returned whole only for the first partition that
 * has one (nothing read yet), and a partition whose next batch does not fit returns
 * nothing while later ones still may.
 */
class Log {
  /** Per "topic/partition", the sizes of the batches not yet fetched. */
  readonly batches = new Map<string, number[]>();
  /**
   * Partitions whose bytes kafkajs decodes into no record (a record batch the log cleaner
   * left empty, then a batch cut at the size limit): each fetch takes their bytes, and they
   * never move on.
   */
  readonly undecodable = new Set<string>();

  add(topic: string, partition: number, sizes: number[]): void {
    this.batches.set(`${topic}/${partition}`, [
      ...(this.batches.get(`${topic}/${partition}`) ?? []),
      ...sizes,
    ]);
  }

  fetch(request: FetchRequest): FetchResponse {
    let left = request.maxBytes!;
    let readAny = false;
    const responses = request.topics.map(({ topic, partitions }) => ({
      topicName: topic,
      partitions: partitions.map(({ partition, maxBytes }) => {
        const queue = this.batches.get(`${topic}/${partition}`) ?? [];
        // The log end as the broker reports it, above the fetch offset ('0') while there is anything to read.
        const highWatermark = String(queue.length);
        if (this.undecodable.has(`${topic}/${partition}`)) {
          left -= Math.min(maxBytes!, left);
          readAny = true;
          return { partition, highWatermark, messages: [] };
        }
        const messages: { offset: string; isControlRecord: boolean }[] = [];
        let taken = 0;
        while (queue.length > 0) {
          const size = queue[0]!;
          const fits = taken + size <= maxBytes! && size <= left;
          if (!fits && (readAny || taken > 0)) break;
          queue.shift();
          taken += size;
          left -= Math.min(size, left);
          readAny = true;
          messages.push({ offset: String(messages.length), isControlRecord: false });
        }
        return { partition, highWatermark, messages };
      }),
    }));
    return { responses } as unknown as FetchResponse;
  }

  get empty(): boolean {
    return [...this.batches.values()].every((q) => q.length === 0);
  }
}

/** A consumer's request: every assigned partition, in kafkajs's consumer-group order. */
function requestFor(
  assigned: readonly { topic: string; partitions: number }[],
  sizes: { maxBytes: number; partitionMaxBytes: number },
): FetchRequest {
  return {
    maxBytes: sizes.maxBytes,
    topics: assigned.map(({ topic, partitions }) => ({
      topic,
      partitions: Array.from({ length: partitions }, (_, partition) => ({
        partition,
        fetchOffset: '0',
        maxBytes: sizes.partitionMaxBytes,
      })),
    })),
  };
}

const flat = (topics: FetchRequest['topics']) =>
  topics.flatMap((t) => t.partitions.map((p) => `${t.topic}/${p.partition}`));

/** Fetches until the log is drained; per topic, the fetches (by index) that returned its records. */
function drain(order: FetchOrder, log: Log, request: FetchRequest): Map<string, Set<number>> {
  const fetchesOf = new Map<string, Set<number>>();
  for (let n = 0; !log.empty; n++) {
    if (n > 10_000) throw new Error('the log never drained: a partition starves');
    const ordered = { ...request, topics: order.order(request.topics) };
    const answer = log.fetch(ordered);
    order.answered(ordered, answer);
    for (const { topicName, partitions } of answer.responses)
      if (partitions.some((p) => (p.messages?.length ?? 0) > 0)) {
        const fetches = fetchesOf.get(topicName) ?? new Set<number>();
        fetches.add(n);
        fetchesOf.set(topicName, fetches);
      }
  }
  return fetchesOf;
}

describe('the order partitions are fetched in', () => {
  test("a topic's partitions come in one fetch or two in a row, so a routed table's backlog is staged and published once", () => {
    // 50 topics of 3 partitions, 400 KB backlog each; a fetch holds 2 MB (about five partitions).
    const assigned = Array.from({ length: 50 }, (_, t) => ({ topic: `orders.${t}`, partitions: 3 }));
    const log = new Log();
    for (const { topic } of assigned)
      for (let p = 0; p < 3; p++) log.add(topic, p, [100e3, 100e3, 100e3, 100e3]);
    const request = requestFor(assigned, { maxBytes: 2e6, partitionMaxBytes: 2e6 });
    const fetchesOf = drain(new FetchOrder(), log, request);
    expect(fetchesOf.size).toBe(50);
    const spread = [...fetchesOf]
      .map(([topic, fetches]) => ({ topic, fetches: [...fetches].sort((a, b) => a - b) }))
      .filter(
        ({ fetches }) =>
          fetches.length > 2 || fetches[fetches.length - 1]! - fetches[0]! !== fetches.length - 1,
      );
    expect(spread).toEqual([]);
  });

  test('every partition with records is answered in turn when its batches are larger than the sizes asked', () => {
    // A compressed topic's fetch scaled below one batch: only the first partition with a
    // batch is answered (KIP-74), so the order alone decides who is ever answered.
    const assigned = [
      { topic: 'a', partitions: 4 },
      { topic: 'b', partitions: 4 },
    ];
    const log = new Log();
    for (const { topic } of assigned) for (let p = 0; p < 4; p++) log.add(topic, p, [1e6, 1e6, 1e6]);
    const request = requestFor(assigned, { maxBytes: 256e3, partitionMaxBytes: 64e3 });
    const order = new FetchOrder();
    const answeredIn: string[] = [];
    for (let n = 0; n < 24; n++) {
      const ordered = { ...request, topics: order.order(request.topics) };
      const answer = log.fetch(ordered);
      order.answered(ordered, answer);
      const got = answer.responses.flatMap((t) =>
        t.partitions.filter((p) => (p.messages?.length ?? 0) > 0).map((p) => `${t.topicName}/${p.partition}`),
      );
      expect(got).toHaveLength(1);
      answeredIn.push(got[0]!);
    }
    // Each of the 8 partitions once in every 8 fetches: none starves, none is favoured.
    for (let round = 0; round < 3; round++)
      expect(new Set(answeredIn.slice(round * 8, round * 8 + 8)).size).toBe(8);
    expect(log.empty).toBe(true);
  });

  test('a quiet partition is asked first the moment it holds a record, ahead of a backlog', () => {
    const assigned = [
      { topic: 'busy', partitions: 2 },
      { topic: 'quiet', partitions: 1 },
    ];
    const log = new Log();
    for (let p = 0; p < 2; p++) log.add('busy', p, Array<number>(100).fill(1e6));
    const request = requestFor(assigned, { maxBytes: 1e6, partitionMaxBytes: 1e6 });
    const order = new FetchOrder();
    for (let n = 0; n < 5; n++) {
      const ordered = { ...request, topics: order.order(request.topics) };
      order.answered(ordered, log.fetch(ordered));
    }
    log.add('quiet', 0, [500]);
    const next = order.order(request.topics);
    expect(flat(next)[0]).toBe('quiet/0');
    const answer = log.fetch({ ...request, topics: next });
    expect(answer.responses.find((t) => t.topicName === 'quiet')!.partitions[0]!.messages).toHaveLength(1);
  });

  test('a partition whose bytes decode into no record does not take every fetch from the others', () => {
    // Asked first among those with records (an idle partition before it takes no bytes), it
    // would be answered first every time, over the limits (KIP-74).
    const assigned = [
      { topic: '0-idle', partitions: 1 },
      { topic: 'a-compacted', partitions: 1 },
      { topic: 'b', partitions: 2 },
    ];
    const log = new Log();
    log.add('a-compacted', 0, [300e3]);
    log.undecodable.add('a-compacted/0');
    for (let p = 0; p < 2; p++) log.add('b', p, [300e3, 300e3, 300e3]);
    const request = requestFor(assigned, { maxBytes: 100e3, partitionMaxBytes: 100e3 });
    const order = new FetchOrder();
    let fetches = 0;
    while ((log.batches.get('b/0')!.length > 0 || log.batches.get('b/1')!.length > 0) && fetches < 100) {
      const ordered = { ...request, topics: order.order(request.topics) };
      order.answered(ordered, log.fetch(ordered));
      fetches++;
    }
    expect(fetches).toBeLessThanOrEqual(12);
    // The idle partition kept its place: its first record is asked for first.
    expect(flat(order.order(request.topics))[0]).toBe('0-idle/0');
  });

  test("a topic no fetch asked for in a thousand fetches is let go (a pattern's short-lived topics do not pile up)", () => {
    const order = new FetchOrder();
    const topic = (name: string) => ({ topic: name, partitions: [{ partition: 0, fetchOffset: '0' }] });
    order.order([topic('gone')]);
    for (let n = 0; n < 2_000; n++) order.order([topic('kept')]);
    // Still known, 'gone' would be asked first (placed first); let go, it joins at the back.
    expect(flat(order.order([topic('gone'), topic('kept')]))).toEqual(['kept/0', 'gone/0']);
  });

  test('each partition is asked once with its own offset and size; partitions first seen join at the back by topic', () => {
    const order = new FetchOrder();
    const first = order.order([
      { topic: 'b', partitions: [{ partition: 1, fetchOffset: '11', maxBytes: 5 }] },
      {
        topic: 'a',
        partitions: [
          { partition: 2, fetchOffset: '2', maxBytes: 6 },
          { partition: 0, fetchOffset: '0', maxBytes: 7 },
        ],
      },
      { topic: 'b', partitions: [{ partition: 0, fetchOffset: '10', maxBytes: 8 }] },
    ]);
    expect(first).toEqual([
      {
        topic: 'a',
        partitions: [
          { partition: 0, fetchOffset: '0', maxBytes: 7 },
          { partition: 2, fetchOffset: '2', maxBytes: 6 },
        ],
      },
      {
        topic: 'b',
        partitions: [
          { partition: 0, fetchOffset: '10', maxBytes: 8 },
          { partition: 1, fetchOffset: '11', maxBytes: 5 },
        ],
      },
    ]);
    // a/0 and b/0 returned records: behind the others, in the order answered; c/0 is new.
    order.answered({ topics: first }, {
      responses: [
        {
          topicName: 'a',
          partitions: [
            { partition: 0, messages: [{}] },
            { partition: 2, messages: [] },
          ],
        },
        { topicName: 'b', partitions: [{ partition: 0, messages: [{}] }, { partition: 1 }] },
      ],
    } as unknown as FetchResponse);
    const asked = (topics: FetchRequest['topics']) => flat(order.order(topics));
    const all = [
      ...first,
      { topic: 'c', partitions: [{ partition: 0, fetchOffset: '0' }] },
    ] as FetchRequest['topics'];
    expect(asked(all)).toEqual(['a/2', 'b/1', 'a/0', 'b/0', 'c/0']);
  });
});

describe("kafkajs's fetch, sent as ordered", () => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- kafkajs internals, pinned at 2.2.4
  const Broker = require('kafkajs/src/broker') as new (options: object) => {
    fetch(request: FetchRequest): Promise<FetchResponse>;
    lookupRequest: unknown;
  };
  const logger = { namespace: () => ({ debug() {}, info() {}, warn() {}, error() {} }) };

  function recordingBroker() {
    const sent: { topics: FetchRequest['topics']; maxWaitTime: number; rackId: string }[] = [];
    const broker = new Broker({
      connectionPool: {
        send: () => Promise.resolve({ responses: [] }),
        connectionTimeout: 1,
        host: 'h',
        port: 1,
      },
      logger,
    });
    broker.lookupRequest = () => (request: (typeof sent)[number]) => {
      sent.push(request);
      return request;
    };
    return { broker, sent };
  }

  const sixty: FetchRequest = {
    topics: Array.from({ length: 20 }, (_, t) => ({
      topic: `t${String(t).padStart(2, '0')}`,
      partitions: [0, 1, 2].map((partition) => ({ partition, fetchOffset: '0' })),
    })),
  };

  test('goes out in the order given, with kafkajs 2.2.4 defaults (kafkajs itself shuffles it)', async () => {
    const own = recordingBroker();
    await own.broker.fetch(sixty);
    expect(flat(own.sent[0]!.topics)).not.toEqual(flat(sixty.topics));

    const ordered = recordingBroker();
    const fetch = unshuffledFetch(ordered.broker);
    expect(fetch).toBeDefined();
    await fetch!(sixty);
    expect(flat(ordered.sent[0]!.topics)).toEqual(flat(sixty.topics));
    expect(ordered.sent[0]).toMatchObject({ maxWaitTime: 5000, minBytes: 1, maxBytes: 10485760, rackId: '' });
  });

  test('is not made for something that is not a kafkajs broker', () => {
    expect(unshuffledFetch({})).toBeUndefined();
  });
});
