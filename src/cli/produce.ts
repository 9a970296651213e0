import { Kafka, Partitioners, logLevel } from 'kafkajs';
import type { CompressionName } from '../kafka/protocol/compression/codec';
import { compressionType, registerCompressionCodecs } from '../kafka/protocol/compression';
import { ensureTopicsServed } from '../kafka/protocol/topic-ready';
import { connectAdmin } from './kafka-admin';
import { badCount, logRecord } from './log-records';

export interface ProduceOptions {
  readonly brokers: readonly string[];
  readonly topic: string;
  /** Records per second; 0 = as fast as the broker takes them. */
  readonly rate: number;
  readonly count: number;
  /** Approximate bytes per good record; 0 = natural size. */
  readonly recordBytes: number;
  readonly badRatio: number;
  /** Partitions of the topic when it has to be created. */
  readonly partitions: number;
  /** The codec of the record batches (default none). */
  readonly compression?: CompressionName;
  /** Progress lines (stderr); called every couple of seconds. */
  readonly progress?: (line: string) => void;
  /** Called after each acknowledged send with the running total. */
  readonly onSent?: (produced: number) => void;
}

export interface ProduceResult {
  readonly topic: string;
  readonly created: boolean;
  readonly partitions: number;
  readonly produced: number;
  readonly bad: number;
  readonly bytes: number;
  readonly seconds: number;
}

// One send at a time (idempotent, in order): batches of this many records or bytes.
const MAX_BATCH_RECORDS = 2_000;
const MAX_BATCH_BYTES = 1024 * 1024;
const TICK_MS = 100;

/** A load generator: realistic JSON log records, a share of them undecodable on purpose. */
export async function produce(o: ProduceOptions): Promise<ProduceResult> {
  registerCompressionCodecs();
  const compression = compressionType(o.compression ?? 'none');
  const kafka = new Kafka({
    clientId: 'kafka-lance-produce',
    brokers: [...o.brokers],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 3_000,
    retry: { retries: 3 },
  });
  const admin = await connectAdmin(kafka, o.brokers);
  let created = false;
  let partitions: number;
  try {
    created = (await ensureTopicsServed(admin, [{ topic: o.topic, numPartitions: o.partitions }])).length > 0;
    partitions = (await admin.fetchTopicMetadata({ topics: [o.topic] })).topics[0]?.partitions.length ?? 0;
  } finally {
    await admin.disconnect();
  }
  // Idempotent: a retried send never writes a record twice, so `count` records land exactly.
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    createPartitioner: Partitioners.DefaultPartitioner,
  });
  await producer.connect();
  const started = Date.now();
  let produced = 0;
  let bytes = 0;
  const report = () => {
    const seconds = (Date.now() - started) / 1000;
    o.progress?.(
      `${seconds.toFixed(0).padStart(4)} s  produced ${produced}/${o.count}  ${Math.round(produced / Math.max(seconds, 0.001))} records/s`,
    );
  };
  const timer = o.progress ? setInterval(report, 2_000) : undefined;
  try {
    while (produced < o.count) {
      const tickStart = Date.now();
      // At a fixed rate, each 100 ms tick sends what the schedule owes (catching up after a slow send).
      const due =
        o.rate > 0
          ? Math.min(o.count, Math.floor(((tickStart - started + TICK_MS) * o.rate) / 1000)) - produced
          : o.count - produced;
      let left = Math.max(0, due);
      while (left > 0) {
        const messages: { value: string }[] = [];
        let batchBytes = 0;
        while (messages.length < Math.min(left, MAX_BATCH_RECORDS) && batchBytes < MAX_BATCH_BYTES) {
          const r = logRecord(produced + messages.length, Date.now(), o);
          messages.push({ value: r.value });
          batchBytes += Buffer.byteLength(r.value);
        }
        await producer.send({ topic: o.topic, acks: -1, compression, messages });
        produced += messages.length;
        bytes += batchBytes;
        left -= messages.length;
        o.onSent?.(produced);
      }
      if (o.rate > 0 && produced < o.count) {
        await new Promise((r) => setTimeout(r, Math.max(0, tickStart + TICK_MS - Date.now())));
      }
    }
  } finally {
    if (timer) clearInterval(timer);
    await producer.disconnect();
  }
  return {
    topic: o.topic,
    created,
    partitions,
    produced,
    bad: badCount(produced, o.badRatio),
    bytes,
    seconds: (Date.now() - started) / 1000,
  };
}
