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

/** An admin made as a replica makes its own (createKafka), connected. */
async function replicaAdmin(topics: readonly string[]): Promise<Admin> {
  const consumer = resolveConsumer({ name: 'admin-metadata', topics, schema: 'infer' }, 'test', {
    KAFKA_BOOTSTRAP_SERVERS: testBrokers().join(','),
  });
  const admin = createKafka(consumer, silentLogger()).admin();
  await admin.connect();
  return admin;
}

/**
 * The group's committed offsets, asked again while its coordinator is not found: on a broker
 * just started the offsets topic's partitions are still loading, and kafkajs's admin does
 * not retry.
 */
async function committedOffsets(admin: Admin, groupId: string, topics?: string[]) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await admin.fetchOffsets(topics ? { groupId, topics } : { groupId });
    } catch (error) {
      if (attempt >= 40 || (error as { retriable?: boolean }).retriable !== true) throw error;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/** The Metadata requests `admin` sends from now on (their request sizes in bytes). */
function metadataRequests(admin: Admin): number[] {
  const sent: number[] = [];
  admin.on(admin.events.REQUEST, (e) => {
    if (e.payload.apiName === 'Metadata') sent.push(e.payload.size);
  });
  return sent;
}

test('offset reads of known topics reuse the metadata: a metadata request per new topic, not per read', async () => {
  const topics = [uniqueName('admin-metadata-a'), uniqueName('admin-metadata-b')];
  const admin = await replicaAdmin(topics);
  try {
    await ensureTopicsServed(
      admin,
      topics.map((topic) => ({ topic, numPartitions: 2 })),
    );
    for (const topic of topics) await admin.fetchTopicOffsets(topic);
    // One group throughout, its coordinator found before counting.
    const groupId = uniqueName('admin-metadata-group');
    await committedOffsets(admin, groupId, topics);
    const sent = metadataRequests(admin);
    for (let i = 0; i < 10; i++) {
      for (const topic of topics) expect(await admin.fetchTopicOffsets(topic)).toHaveLength(2);
      await committedOffsets(admin, groupId, topics);
    }
    // Both topics were looked up once above: nothing new to read (kafkajs's own admin made 26
    // requests here). A read that failed on a broker still electing leaders costs one more.
    expect(sent.length).toBeLessThanOrEqual(3);
  } finally {
    await admin.deleteTopics({ topics }).catch(() => undefined);
    await admin.disconnect();
  }
});

test('topics first looked up together are read with one metadata request, not one each naming every topic so far', async () => {
  const topics = Array.from({ length: 8 }, (_, i) => uniqueName(`admin-metadata-together-${i}`));
  const creator = await replicaAdmin(topics);
  const admin = await replicaAdmin(topics);
  try {
    await ensureTopicsServed(
      creator,
      topics.map((topic) => ({ topic, numPartitions: 1 })),
    );
    const groupId = uniqueName('admin-metadata-group');
    await committedOffsets(admin, groupId);
    const sent = metadataRequests(admin);
    const answer = await committedOffsets(admin, groupId, topics);
    expect(answer.map((t) => t.topic).sort()).toEqual([...topics].sort());
    // kafkajs's own admin: one request per topic (8 here), the last naming all eight.
    expect(sent.length).toBeLessThanOrEqual(2);
  } finally {
    await creator.deleteTopics({ topics }).catch(() => undefined);
    await creator.disconnect();
    await admin.disconnect();
  }
});
