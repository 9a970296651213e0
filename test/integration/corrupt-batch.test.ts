import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { CompressionTypes, Kafka, logLevel } from 'kafkajs';
import { FaultBroker } from '../support/fault-broker';
import { sleep, until } from '../support/faults';
import { logValue, readStaged, writeConsumer } from '../support/ingestion-fixture';
import { TEST_BROKER_PORT } from '../support/kafka-local';
import { uniqueName } from '../support/kafka';
import { tempDir } from '../support/rows';
import {
  MAX_DECOMPRESSED_BATCH_BYTES,
  registerCompressionCodecs,
} from '../../src/kafka/protocol/compression';
import { untilTopicServed } from '../../src/kafka/protocol/topic-ready';
import { ReplicaProcess } from '../../src/harness/replica-process';

/**
 * A compressed record batch whose bytes are damaged where the broker keeps them (its
 * segment file: the broker checks a batch's CRC when it is produced, never when it is
 * fetched). Its records cannot be told apart, so it is no dead letter, and kafkajs alone
 * fails the broker's whole fetch for it again and again. The partition must stop at the
 * batch with its offsets named, in one error line and the stop gauge, the batches before
 * it staged and nothing from it on committed, while the other partition goes on. A broker
 * of the test's own (a damaged segment is not for the shared one). Run after `npm run build`.
 */
const PORT = Number(process.env.KAFKA_CORRUPT_BATCH_PORT ?? TEST_BROKER_PORT + 20);
const state: { broker?: FaultBroker; work?: string } = {};

beforeAll(async () => {
  state.work = await tempDir('kl-corrupt');
  state.broker = await FaultBroker.start(PORT, 0);
}, 240_000);

afterAll(async () => {
  await ReplicaProcess.killAll();
  await state.broker?.close();
  if (state.work) await fsp.rm(state.work, { recursive: true, force: true });
}, 120_000);

/** Flips a byte inside the compressed records of the batch that starts at `baseOffset`. */
async function damageBatch(segment: string, baseOffset: number): Promise<void> {
  const bytes = await fsp.readFile(segment);
  for (let at = 0; at + 12 <= bytes.length; at += 12 + bytes.readInt32BE(at + 8)) {
    if (Number(bytes.readBigInt64BE(at)) !== baseOffset) continue;
    const file = await fsp.open(segment, 'r+');
    try {
      const target = at + 61 + 40; // past the header (61 bytes), inside the compressed records
      await file.write(Buffer.from([bytes[target]! ^ 0xff]), 0, 1, target);
    } finally {
      await file.close();
    }
    return;
  }
  throw new Error(`no batch at offset ${baseOffset} in ${segment}`);
}

test('a compressed batch damaged on the broker stops its partition at the batch (offsets named, one error line, the stop gauge): the batches before it are staged, nothing from it on is committed, the other partition goes on', async () => {
  const broker = state.broker!;
  registerCompressionCodecs();
  const kafka = new Kafka({
    clientId: 'corrupt-batch',
    brokers: [broker.address],
    logLevel: logLevel.NOTHING,
  });
  const admin = kafka.admin();
  await admin.connect();
  const producer = kafka.producer({ maxInFlightRequests: 1 });
  await producer.connect();
  const topic = uniqueName('corrupt');
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true });
    await untilTopicServed(admin, topic, 2);
    // Partition 0: three lz4 batches, offsets 0-99, 100-199 (to be damaged), 200-299.
    for (const first of [0, 100, 200])
      await producer.send({
        topic,
        acks: -1,
        compression: CompressionTypes.LZ4,
        messages: Array.from({ length: 100 }, (_, i) => ({ partition: 0, value: logValue(first + i) })),
      });
    await producer.send({
      topic,
      acks: -1,
      compression: CompressionTypes.ZSTD,
      messages: Array.from({ length: 150 }, (_, i) => ({ partition: 1, value: logValue(1_000 + i) })),
    });
    await damageBatch(path.join(broker.logDir, `${topic}-0`, '00000000000000000000.log'), 100);

    const name = uniqueName('c').replace(/[^A-Za-z0-9_-]/g, '');
    const file = await writeConsumer(state.work!, {
      name,
      topics: [topic],
      table: 'logs',
      schema: {
        fields: {
          n: { type: 'int64', nullable: false },
          level: 'string',
          service: { type: 'string', nullable: false },
          message: 'string',
        },
      },
      fromBeginning: true,
      deadLetter: { file: path.join(state.work!, `${name}.dlq.jsonl`) },
      staging: { maxPartBytes: 8 * 1024 * 1024, maxPartAgeMs: 1_000 },
      materializer: { enabled: false },
      durabilityIntervalMs: 200,
      sessionTimeoutMs: 6_000,
      heartbeatIntervalMs: 500,
      workers: 2,
    });
    const groupId = `kafka-lance-${name}`;
    const committed = async () => {
      const [c] = await admin.fetchOffsets({ groupId, topics: [topic] });
      return new Map(c!.partitions.map((p) => [p.partition, Number(p.offset)]));
    };
    // A new broker creates its offsets topic on first use: not before the replica joins
    // (kafkajs logs the coordinator's absence as an error).
    await until(
      'the group coordinator',
      // COORDINATOR_LOAD_IN_PROGRESS (thrown) until the offsets topic is loaded.
      () =>
        committed().then(
          (c) => (c.size === 2 ? true : undefined),
          () => undefined,
        ),
      60_000,
    );
    const dir = await tempDir('kl-corrupt-data');
    const replica = new ReplicaProcess(file, dir, [broker.address]);

    const stopped = await replica.waitFor((l) => l.event === 'partition.stopped', 90_000);
    expect(stopped).toMatchObject({
      topic,
      partition: 0,
      offset: 100,
      reason: 'corrupt-record-batch',
      codec: 'lz4',
      batchFirstOffset: 100,
      batchLastOffset: 199,
    });
    expect(String(stopped.msg)).toContain('offsets 100-199');
    expect(String(stopped.msg)).toContain('to 200');
    expect(stopped.level).toBeGreaterThanOrEqual(50);

    // The other partition goes on, also after the stop.
    await until('partition 1 committed at 150', async () =>
      (await committed()).get(1) === 150 ? true : undefined,
    );
    await producer.send({
      topic,
      acks: -1,
      compression: CompressionTypes.Snappy,
      messages: Array.from({ length: 5 }, (_, i) => ({ partition: 1, value: logValue(2_000 + i) })),
    });
    await until('partition 1 committed at 155', async () =>
      (await committed()).get(1) === 155 ? true : undefined,
    );
    // The batch before the damaged one was delivered; nothing from the damaged one on is committed.
    await until('partition 0 committed at 100', async () =>
      (await committed()).get(0) === 100 ? true : undefined,
    );
    await sleep(2_000);
    expect((await committed()).get(0)).toBe(100);
    const gauge = (await replica.metricsText())
      .split('\n')
      .filter((l) => l.startsWith('kafka_lance_partition_stopped{'));
    expect(gauge).toEqual([expect.stringMatching(/partition="0".*reason="corrupt-record-batch".* 1$/)]);
    // One error line: no kafkajs fetch error, no crash and restart of the consumer.
    const errors = replica.logs.filter((l) => l.level >= 50).map((l) => `${l.event ?? ''} ${l.msg ?? ''}`);
    expect(errors).toHaveLength(1);
    expect(replica.logs.filter((l) => l.event === 'kafka.crash')).toEqual([]);

    expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
    expect((await committed()).get(0)).toBe(100);
    const staged = await readStaged([dir], 'logs');
    const p0 = staged.filter((r) => r.partition === 0).map((r) => r.offset);
    expect(p0.sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    expect(staged.filter((r) => r.partition === 1)).toHaveLength(155);
  } finally {
    await producer.disconnect();
    await admin.disconnect();
  }
});

test('a zstd batch that decompresses over the cap (a bomb the broker accepts) stops its partition at the batch instead of exhausting the replica', async () => {
  const broker = state.broker!;
  registerCompressionCodecs();
  const kafka = new Kafka({
    clientId: 'corrupt-batch-bomb',
    brokers: [broker.address],
    logLevel: logLevel.NOTHING,
  });
  const admin = kafka.admin();
  await admin.connect();
  const producer = kafka.producer({ maxInFlightRequests: 1 });
  await producer.connect();
  const topic = uniqueName('bomb');
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
    await untilTopicServed(admin, topic, 1);
    await producer.send({
      topic,
      acks: -1,
      compression: CompressionTypes.ZSTD,
      messages: Array.from({ length: 10 }, (_, i) => ({ partition: 0, value: logValue(i) })),
    });
    // One record of zeros just over the cap: a few KiB on the broker.
    await producer.send({
      topic,
      acks: -1,
      compression: CompressionTypes.ZSTD,
      messages: [{ partition: 0, value: Buffer.alloc(MAX_DECOMPRESSED_BATCH_BYTES + 1024) }],
    });
    const name = uniqueName('b').replace(/[^A-Za-z0-9_-]/g, '');
    const file = await writeConsumer(state.work!, {
      name,
      topics: [topic],
      table: 'logs',
      schema: { fields: { n: { type: 'int64', nullable: false }, message: 'string' } },
      fromBeginning: true,
      deadLetter: { file: path.join(state.work!, `${name}.dlq.jsonl`) },
      staging: { maxPartBytes: 8 * 1024 * 1024, maxPartAgeMs: 1_000 },
      materializer: { enabled: false },
      durabilityIntervalMs: 200,
      sessionTimeoutMs: 6_000,
      heartbeatIntervalMs: 500,
      workers: 1,
    });
    const groupId = `kafka-lance-${name}`;
    const committed = async () => {
      const [c] = await admin.fetchOffsets({ groupId, topics: [topic] });
      return Number(c!.partitions.find((p) => p.partition === 0)!.offset);
    };
    const replica = new ReplicaProcess(file, await tempDir('kl-bomb-data'), [broker.address]);
    const stopped = await replica.waitFor((l) => l.event === 'partition.stopped', 90_000);
    expect(stopped).toMatchObject({
      topic,
      partition: 0,
      offset: 10,
      reason: 'corrupt-record-batch',
      codec: 'zstd',
    });
    expect(String(stopped.msg)).toContain(`the cap of ${MAX_DECOMPRESSED_BATCH_BYTES} bytes`);
    await until('the batch before the bomb committed', async () =>
      (await committed()) === 10 ? true : undefined,
    );
    expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
    expect(await committed()).toBe(10);
  } finally {
    await producer.disconnect();
    await admin.disconnect();
  }
});
