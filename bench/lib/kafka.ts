/** The bench's broker (given, or a local one it starts and stops) and its data topic. */
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { CompressionTypes, Kafka, Partitioners, logLevel, type Admin } from 'kafkajs';
import { registerCompressionCodecs } from '../../src/kafka/protocol/compression';
import { benchRecord } from './records';

const REPO = path.resolve(__dirname, '../../..');

export interface Broker {
  readonly brokers: string[];
  /** Stops the broker if the bench started it. */
  stop(): void;
}

/** KAFKA_BOOTSTRAP_SERVERS if set, else a local KRaft broker on KAFKA_LOCAL_PORT (default 9092). */
export function ensureBroker(log: (line: string) => void): Broker {
  const given = process.env.KAFKA_BOOTSTRAP_SERVERS ?? process.env.KAFKA_BROKERS;
  if (given) return { brokers: given.split(','), stop: () => undefined };
  const script = path.join(REPO, 'deploy/kafka-local/kafka-local');
  const port = process.env.KAFKA_LOCAL_PORT ?? '9092';
  const status = (() => {
    try {
      return execFileSync(script, ['status'], { encoding: 'utf8' });
    } catch {
      return '';
    }
  })();
  const wasRunning = /up on|running/.test(status);
  if (!wasRunning) {
    log(`starting a local Kafka broker on 127.0.0.1:${port} (deploy/kafka-local)`);
    execFileSync(script, ['start'], { stdio: ['ignore', 'inherit', 'inherit'] });
  } else log(`using the local Kafka broker already running on 127.0.0.1:${port}`);
  return {
    brokers: [`127.0.0.1:${port}`],
    stop: () => {
      if (wasRunning) return;
      log('stopping the local Kafka broker');
      execFileSync(script, ['stop'], { stdio: ['ignore', 'inherit', 'inherit'] });
    },
  };
}

export function kafkaClient(brokers: readonly string[]): Kafka {
  registerCompressionCodecs();
  return new Kafka({ clientId: 'bench', brokers: [...brokers], logLevel: logLevel.NOTHING });
}

/**
 * How many records `topic` holds; undefined when no such topic is listed; NaN when it is
 * listed but its offsets stay unreadable for 30 s (a topic being deleted has no partitions
 * to ask). A broker just started lists a topic before it leads its partitions: that is
 * waited out, or a topic holding the data would read as absent and be produced into again.
 */
export async function topicRecords(admin: Admin, topic: string): Promise<number | undefined> {
  if (!(await admin.listTopics()).includes(topic)) return undefined;
  for (let attempt = 1; attempt <= 30; attempt++) {
    const offsets = await admin.fetchTopicOffsets(topic).catch(() => undefined);
    if (offsets) return offsets.reduce((n, o) => n + Number(o.high) - Number(o.low), 0);
    await new Promise((r) => setTimeout(r, 1_000));
  }
  return NaN;
}

export interface Dataset {
  readonly topic: string;
  readonly records: number;
  readonly bytes: number;
  /** Seconds the produce took (0 when an existing topic with the right count was reused). */
  readonly produceSeconds: number;
  readonly reused: boolean;
}

/**
 * Produces `records` bench records into `topic` (6 partitions, round robin in blocks),
 * unless it already holds exactly that many (a rerun reuses it). Sends of ~2 MiB per
 * partition, all partitions at once, acks=all. `encode` turns each JSON record into the
 * value sent (the Avro arm's serializer); a reused topic's bytes are then the caller's to count.
 * `compression`: the codec of every record batch (the codec arms).
 */
/**
 * The topic created with `partitions`, after deleting the one of that name when `exists`.
 * Deletion is asynchronous on the broker, and kafkajs's createTopics answers false (no error)
 * while the name is still taken: producing then would add to the old topic's records (a
 * topic the broker's 24-hour retention had partly emptied once held 1.32M instead of 1M).
 */
export async function recreateTopic(
  admin: Admin,
  topic: string,
  partitions: number,
  exists: boolean,
): Promise<void> {
  if (exists) await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
  for (let attempt = 1; ; attempt++) {
    let created = false;
    try {
      created = await admin.createTopics({
        topics: [{ topic, numPartitions: partitions }],
        waitForLeaders: true,
      });
    } catch (error) {
      if (attempt >= 120) throw error;
    }
    if (created) return;
    if (attempt >= 120) throw new Error(`topic ${topic} was not deleted in 120 s: not producing into it`);
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

export async function produceDataset(
  brokers: readonly string[],
  topic: string,
  records: number,
  partitions: number,
  log: (line: string) => void,
  encode?: (json: string) => Promise<Buffer>,
  compression: CompressionTypes = CompressionTypes.None,
): Promise<Dataset> {
  const kafka = kafkaClient(brokers);
  const admin = kafka.admin();
  await admin.connect();
  try {
    const existing = await topicRecords(admin, topic);
    const sample = Buffer.byteLength(benchRecord(records >> 1));
    if (existing === records) {
      log(`reusing topic ${topic} (${records} records)`);
      return { topic, records, bytes: sample * records, produceSeconds: 0, reused: true };
    }
    await recreateTopic(admin, topic, partitions, existing !== undefined);
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    const t0 = performance.now();
    let bytes = 0;
    let next = 0;
    const perSend = 2_500;
    let lastLog = t0;
    while (next < records) {
      const sends: Promise<unknown>[] = [];
      for (let p = 0; p < partitions && next < records; p++) {
        const messages: { value: string | Buffer }[] = [];
        for (; messages.length < perSend && next < records; next++) {
          const value = encode ? await encode(benchRecord(next)) : benchRecord(next);
          bytes += Buffer.byteLength(value);
          messages.push({ value });
        }
        sends.push(
          producer.send({
            topic,
            acks: -1,
            compression,
            messages: messages.map((m) => ({ ...m, partition: p })),
          }),
        );
      }
      await Promise.all(sends);
      if (performance.now() - lastLog > 5_000) {
        lastLog = performance.now();
        log(`  produced ${next}/${records}`);
      }
    }
    await producer.disconnect();
    const held = await topicRecords(admin, topic);
    if (held !== records) throw new Error(`topic ${topic} holds ${held} records after producing ${records}`);
    const produceSeconds = (performance.now() - t0) / 1000;
    log(
      `produced ${records} records (${(bytes / 2 ** 20).toFixed(0)} MiB) in ${produceSeconds.toFixed(1)} s`,
    );
    return { topic, records, bytes, produceSeconds, reused: false };
  } finally {
    await admin.disconnect();
  }
}
