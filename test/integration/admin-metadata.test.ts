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

test('topics first looked up together are read with one metadata request, not one each naming every topic so far', async () => {
  const topics = Array.from({ length: 8 }, (_, i) => uniqueName(`admin-metadata-together-${i}`));
  const consumer = resolveConsumer({ name: 'admin-metadata', topics, schema: 'infer' }, 'test', {
    KAFKA_BOOTSTRAP_SERVERS: testBrokers().join(','),
  });
  const creator = createKafka(consumer, silentLogger()).admin();
  await creator.connect();
  const admin: Admin = createKafka(consumer, silentLogger()).admin();
  await admin.connect();
  try {
    await ensureTopicsServed(
      creator,
      topics.map((topic) => ({ topic, numPartitions: 1 })),
    );
    // The group's coordinator first (a broker just started may still be loading it).
    const groupId = uniqueName('admin-metadata-group');
    for (let attempt = 1; ; attempt++) {
      try {
        await admin.fetchOffsets({ groupId });
        break;
      } catch (error) {
        if (attempt >= 40 || (error as { retriable?: boolean }).retriable !== true) throw error;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
    const named: number[] = [];
    admin.on(admin.events.REQUEST, (e) => {
      if (e.payload.apiName === 'Metadata') named.push(e.payload.size);
    });
    const answer = await admin.fetchOffsets({ groupId, topics });
    expect(answer.map((t) => t.topic).sort()).toEqual([...topics].sort());
    // kafkajs's own admin: one request per topic (8 here), the last naming all eight.
    expect(named.length).toBeLessThanOrEqual(2);
  } finally {
    await creator.deleteTopics({ topics }).catch(() => undefined);
    await creator.disconnect();
    await admin.disconnect();
  }
});
