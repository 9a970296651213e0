import { ConfigError, resolveConsumer } from '../../src/config';
import { checkTopicsExist } from '../../src/replica/startup-checks';
import { brokerSuite, untilHosted } from '../support/broker-suite';
import { testBrokers, uniqueName } from '../support/kafka';

/**
 * `truncate: 'apply'` against the real broker's topic metadata: a Debezium truncate has no key,
 * so Kafka orders it against its own partition's records only; on a topic of several partitions
 * a key's older record in another partition could land after it and come back. The start
 * refuses that, naming the field and the partition count; a topic of one partition starts.
 */
const suite = brokerSuite('kl-truncate-check');

const definition = (topic: string) =>
  resolveConsumer(
    {
      name: 'docs',
      brokers: testBrokers(),
      topics: [topic],
      schema: { fields: { id: 'int64', note: 'string' } },
      mode: 'upsert',
      key: { fields: ['id'] },
      envelope: 'debezium',
      truncate: 'apply',
    },
    'docs.json',
  );

test('truncate "apply" on a topic of two partitions stops the start naming truncate and the partition count; one partition starts', async () => {
  const two = uniqueName('truncate-two');
  const one = uniqueName('truncate-one');
  await suite.admin.createTopics({
    topics: [
      { topic: two, numPartitions: 2 },
      { topic: one, numPartitions: 1 },
    ],
    waitForLeaders: true,
  });
  await untilHosted(suite.admin, two, 2);
  await untilHosted(suite.admin, one, 1);
  const refused = await checkTopicsExist(suite.admin, definition(two)).then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(refused).toBeInstanceOf(ConfigError);
  expect((refused as ConfigError).problems).toEqual([
    { field: 'truncate', message: expect.stringContaining(`${two} has 2`) as unknown },
  ]);
  await expect(checkTopicsExist(suite.admin, definition(one))).resolves.toBeUndefined();
  await suite.admin.deleteTopics({ topics: [two, one] });
}, 60_000);
