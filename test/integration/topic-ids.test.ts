import { silentLogger } from '../../src/common/logger';
import { TopicIds } from '../../src/kafka/protocol/topic-ids';
import { brokerSuite, untilHosted } from '../support/broker-suite';
import { until } from '../support/faults';
import { uniqueName } from '../support/kafka';

/**
 * Topic ids come from a Metadata v10-12 request that kafka-lance codes itself and sends
 * over a connection of kafkajs's own cluster (kafkajs 2.2.4 stops at Metadata v6). On
 * the real broker: a topic has an id in Kafka's text form, a missing topic has none
 * (and is not created by asking), and a topic deleted and recreated under the same
 * name has another id: the only thing that tells its records from the old ones'.
 */
const suite = brokerSuite('kl-topic-ids');

test('the broker answers each topic its id; a missing topic has none and is not created; a recreated topic has a new id', async () => {
  const topic = uniqueName('ids');
  const missing = uniqueName('missing');
  await suite.admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true });
  await untilHosted(suite.admin, topic, 2);
  const ids = new TopicIds(suite.kafka, silentLogger());
  try {
    const first = await ids.lookup([topic, missing]);
    expect([...first.keys()]).toEqual([topic]);
    expect(first.get(topic)).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(await suite.admin.listTopics()).not.toContain(missing);

    await suite.admin.deleteTopics({ topics: [topic], timeout: 30_000 });
    await until(
      'the topic recreated',
      async () => {
        try {
          await suite.admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true });
          return true;
        } catch {
          return undefined; // still being deleted
        }
      },
      30_000,
      500,
    );
    const second = await ids.lookup([topic]);
    expect(second.get(topic)).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(second.get(topic)).not.toBe(first.get(topic));
  } finally {
    await ids.close();
  }
});
