import type { Admin } from 'kafkajs';
import { silentLogger } from '../../src/common/logger';
import { resolveConsumer } from '../../src/config';
import { createKafka } from '../../src/kafka/protocol/client';
import { ensureTopicsServed } from '../../src/kafka/protocol/topic-ready';
import { testBrokers, uniqueName } from '../support/kafka';

/**
 * A replica's admin reads log bounds and committed offsets topic by topic (each claim, each
 * lag gauge). kafkajs's own admin asked the broker for the metadata of every topic it had
 * ever looked up before each of them: with a pattern over 200 topics, hundreds of metadata
 * requests naming 200 topics each, for as long as the replica ran.
 */
test('offset reads of known topics reuse the metadata: a metadata request per new topic, not per read', async () => {
  const topics = [uniqueName('admin-metadata-a'), uniqueName('admin-metadata-b')];
  const consumer = resolveConsumer({ name: 'admin-metadata', topics, schema: 'infer' }, 'test', {
    KAFKA_BOOTSTRAP_SERVERS: testBrokers().join(','),
  });
  const admin: Admin = createKafka(consumer, silentLogger()).admin();
  await admin.connect();
  try {
    await ensureTopicsServed(
      admin,
      topics.map((topic) => ({ topic, numPartitions: 2 })),
    );
    for (const topic of topics) await admin.fetchTopicOffsets(topic);
    // One group throughout, its coordinator found before counting: on a broker just started,
    // the offsets topic's partitions are still loading and kafkajs's admin does not retry.
    const groupId = uniqueName('admin-metadata-group');
    const committed = async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await admin.fetchOffsets({ groupId, topics });
        } catch (error) {
          if (attempt >= 40 || (error as { retriable?: boolean }).retriable !== true) throw error;
          await new Promise((r) => setTimeout(r, 250));
        }
      }
    };
    await committed();
    let metadataRequests = 0;
    admin.on(admin.events.REQUEST, (e) => {
      if (e.payload.apiName === 'Metadata') metadataRequests += 1;
    });
    for (let i = 0; i < 10; i++) {
      for (const topic of topics) expect(await admin.fetchTopicOffsets(topic)).toHaveLength(2);
      await committed();
    }
    // Both topics were looked up once above: nothing new to read (kafkajs's own admin made 26
    // requests here). A read that failed on a broker still electing leaders costs one more.
    expect(metadataRequests).toBeLessThanOrEqual(3);
  } finally {
    await admin.deleteTopics({ topics }).catch(() => undefined);
    await admin.disconnect();
  }
});
