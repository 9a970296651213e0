import * as lancedb from '@lancedb/lancedb';
import { Kafka, logLevel, type Producer } from 'kafkajs';
import type { Campaign } from './campaign';
import { TABLE } from './campaign';
import type { ReadableOffsets } from './expected-offsets';
import { checksummedValue, notJson } from './producer';
import type { Random } from './random';
import { sleep } from './random';
import { PATIENT_PRODUCER_RETRY } from './topics';

/**
 * Support of the steps whose topics have offsets no record fills (compacted, transactional,
 * retention): a plain reader that says which records a log holds now, producers of
 * checksummed records that keep the offsets they were given, and the replicas' metrics.
 */

/** A record as a reader read it, or as a producer had it acknowledged. */
export interface LogRecord {
  readonly partition: number;
  readonly offset: number;
  readonly key: string | null;
  readonly value: string;
}

let readers = 0;

/**
 * Every record a plain kafkajs consumer (read_committed, its own group, from the
 * beginning) delivers from the topic now, read until nothing new came for `quietMs`
 * after it joined. kafkajs hides aborted records and transaction markers; what a
 * compacted topic's cleaner removed is simply not there.
 */
export async function readTopic(
  brokers: readonly string[],
  topic: string,
  quietMs = 2_500,
  timeoutMs = 120_000,
): Promise<LogRecord[]> {
  const kafka = new Kafka({
    clientId: 'kafka-lance-qualify-reader',
    brokers: [...brokers],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 3_000,
  });
  readers += 1;
  const consumer = kafka.consumer({
    groupId: `qualify-reader-${topic}-${Date.now().toString(36)}-${readers}`,
    sessionTimeout: 10_000,
    heartbeatInterval: 1_000,
  });
  const seen = new Map<string, LogRecord>();
  let last = Number.POSITIVE_INFINITY;
  consumer.on(consumer.events.GROUP_JOIN, () => {
    last = Date.now();
  });
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({
      eachBatch: ({ batch }) => {
        for (const m of batch.messages)
          seen.set(`${batch.partition}:${m.offset}`, {
            partition: batch.partition,
            offset: Number(m.offset),
            key: m.key?.toString() ?? null,
            value: m.value?.toString() ?? '',
          });
        last = Date.now();
        return Promise.resolve();
      },
    });
    const deadline = Date.now() + timeoutMs;
    while (Date.now() - last < quietMs || last === Number.POSITIVE_INFINITY) {
      if (Date.now() > deadline)
        throw new Error(`the reader of ${topic} found no quiet end in ${timeoutMs} ms`);
      await sleep(250);
    }
  } finally {
    await consumer.disconnect().catch(() => undefined);
  }
  return [...seen.values()].sort((a, b) => a.partition - b.partition || a.offset - b.offset);
}

/**
 * Reads the topic (readTopic) again and again until the reader reads exactly the `want`
 * records ("p:o" keys) or `timeoutMs` has passed: a loaded broker can make one read end
 * early, and a compacted topic's cleaner runs when it runs. Returns the last read.
 */
export async function readUntil(
  brokers: readonly string[],
  topic: string,
  want: ReadonlySet<string>,
  timeoutMs: number,
  log: (line: string) => void,
): Promise<{ records: LogRecord[]; passes: number; seconds: number; extra: number; absent: number }> {
  const started = Date.now();
  for (let passes = 1; ; passes++) {
    const records = await readTopic(brokers, topic);
    const diff = compareKeys(keysOf(records), want);
    const seconds = (Date.now() - started) / 1000;
    if (diff.equal || Date.now() - started > timeoutMs) return { records, passes, seconds, ...diff };
    log(
      `reader pass ${passes}: ${records.length} records, ${diff.extra} not expected, ${diff.absent} expected absent`,
    );
    await sleep(2_000);
  }
}

/** The (partition → offsets) of records, as the final check's reference. */
export function readableOf(reader: string, records: readonly LogRecord[]): ReadableOffsets {
  const offsets = new Map<number, Set<number>>();
  for (const r of records) {
    let set = offsets.get(r.partition);
    if (!set) offsets.set(r.partition, (set = new Set()));
    set.add(r.offset);
  }
  return { reader, offsets };
}

/** "p:o" keys of records, for set comparisons. */
export function keysOf(records: readonly { partition: number; offset: number }[]): Set<string> {
  return new Set(records.map((r) => `${r.partition}:${r.offset}`));
}

/** Whether two sets of "p:o" keys are equal, and if not, how they differ (for the log). */
export function compareKeys(
  got: ReadonlySet<string>,
  want: ReadonlySet<string>,
): { equal: boolean; extra: number; absent: number } {
  let extra = 0;
  let absent = 0;
  for (const k of got) if (!want.has(k)) extra += 1;
  for (const k of want) if (!got.has(k)) absent += 1;
  return { equal: extra === 0 && absent === 0, extra, absent };
}

/** The value of record `n`: checksummed JSON of `chars` payload characters, or not JSON every `badEvery`th. */
export function recordValue(random: Random, n: number, chars: number, badEvery: number): string {
  return n % badEvery === badEvery - 1 ? notJson(n) : checksummedValue(random, n, chars);
}

/** A producer for the steps' own sends (patient: the shared broker may be loaded). */
export async function connectedProducer(
  c: Campaign,
  options: { transactionalId?: string } = {},
): Promise<Producer> {
  const producer = c.kafka.producer({
    allowAutoTopicCreation: false,
    retry: PATIENT_PRODUCER_RETRY,
    ...(options.transactionalId
      ? { transactionalId: options.transactionalId, idempotent: true, maxInFlightRequests: 1 }
      : {}),
  });
  await producer.connect();
  return producer;
}

/**
 * Sends `messages` to one partition in one request (kafkajs writes them as one record
 * batch) and returns them with the offsets the broker gave them.
 */
export async function sendToPartition(
  send: Producer['send'],
  topic: string,
  partition: number,
  messages: readonly { key?: string; value: string }[],
): Promise<LogRecord[]> {
  const [meta] = await send({
    topic,
    acks: -1,
    messages: messages.map((m) => ({
      partition,
      value: m.value,
      ...(m.key !== undefined ? { key: m.key } : {}),
    })),
  });
  const base = Number(meta!.baseOffset);
  return messages.map((m, i) => ({ partition, offset: base + i, key: m.key ?? null, value: m.value }));
}

/** Values of a metric per label set, from Prometheus text: `name{a="x",b="y"} v`. */
export function metricValues(
  text: string,
  name: string,
): { labels: Record<string, string>; value: number }[] {
  const out: { labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const m = /^[^{\s]+(?:\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const pair of (m[1] ?? '').matchAll(/(\w+)="([^"]*)"/g)) labels[pair[1]!] = pair[2]!;
    out.push({ labels, value: Number(m[2]) });
  }
  return out;
}

/** `n` → how many rows carry it, over the whole table (LanceDB for Node). */
export async function rowNumbers(c: Campaign): Promise<Map<number, number>> {
  const db = await lancedb.connect(c.lanceUri, {
    readConsistencyInterval: 0,
    ...(Object.keys(c.storageOptions).length > 0 ? { storageOptions: { ...c.storageOptions } } : {}),
  });
  const counts = new Map<number, number>();
  try {
    if (!(await db.tableNames()).includes(TABLE)) return counts;
    const t = await db.openTable(TABLE);
    try {
      for await (const batch of t.query().select(['_topic', 'n'])) {
        const topic = batch.getChild('_topic')!;
        const n = batch.getChild('n')!;
        for (let i = 0; i < batch.numRows; i++) {
          if (topic.get(i) !== c.topic) continue;
          const v = Number(n.get(i));
          counts.set(v, (counts.get(v) ?? 0) + 1);
        }
      }
    } finally {
      t.close();
    }
  } finally {
    db.close();
  }
  return counts;
}

export const MiB = 1024 * 1024;
