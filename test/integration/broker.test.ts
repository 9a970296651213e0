import { untilHosted } from '../support/broker-suite';
import { testBrokers, testKafka, uniqueName } from '../support/kafka';

/**
 * The foundation's proof that tests reach a real broker: produce, consume in a
 * group with explicit commits, and read the committed offsets back through the
 * admin API.
 */
describe('local Kafka broker', () => {
  const kafka = testKafka();
  const admin = kafka.admin();

  beforeAll(async () => {
    await admin.connect();
  });
  afterAll(async () => {
    await admin.disconnect();
  });

  it('commits explicit offsets that equal the log-end offsets of every partition', async () => {
    const topic = uniqueName('foundation');
    const groupId = uniqueName('foundation-group');
    const total = 10_000;
    await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true });
    await untilHosted(admin, topic, 3);

    const producer = kafka.producer();
    await producer.connect();
    for (let start = 0; start < total; start += 1_000) {
      await producer.send({
        topic,
        acks: -1,
        messages: Array.from({ length: 1_000 }, (_, i) => ({
          key: `k${start + i}`,
          value: JSON.stringify({ n: start + i }),
        })),
      });
    }
    await producer.disconnect();

    const consumer = kafka.consumer({ groupId, sessionTimeout: 30_000 });
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    const seen = new Set<number>();
    const done = new Promise<void>((resolve, reject) => {
      consumer
        .run({
          autoCommit: false,
          eachBatchAutoResolve: false,
          eachBatch: async ({ batch, heartbeat }) => {
            for (const m of batch.messages) seen.add((JSON.parse(m.value!.toString()) as { n: number }).n);
            const last = batch.messages[batch.messages.length - 1];
            if (last) {
              await consumer.commitOffsets([
                { topic, partition: batch.partition, offset: String(Number(last.offset) + 1) },
              ]);
            }
            await heartbeat();
            if (seen.size === total) resolve();
          },
        })
        .catch(reject);
    });
    await done;
    await consumer.disconnect();

    expect(seen.size).toBe(total);
    const logEnd = await admin.fetchTopicOffsets(topic);
    const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
    const byPartition = new Map(committed!.partitions.map((p) => [p.partition, p.offset]));
    expect(logEnd).toHaveLength(3);
    for (const p of logEnd) {
      expect(Number(p.high)).toBeGreaterThan(0);
      expect(byPartition.get(p.partition)).toBe(p.high);
    }
    expect(logEnd.reduce((n, p) => n + Number(p.high), 0)).toBe(total);
    console.log(`broker ${testBrokers().join(',')}: ${total} records over 3 partitions committed at log end`);
  });
});
