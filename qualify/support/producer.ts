import { createHash } from 'node:crypto';
import { Kafka, logLevel, type Producer } from 'kafkajs';
import { Random, sleep } from './random';

/** A record the campaign produces: `sha` is the SHA-256 of `payload`, recomputed per row at the end. */
export interface ChecksummedRecord {
  readonly n: number;
  readonly payload: string;
  readonly sha: string;
}

export const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

export interface ProductionOptions {
  readonly brokers: readonly string[];
  readonly topic: string;
  readonly partitions: number;
  /** Bytes of record values to produce in all. */
  readonly totalBytes: number;
  /** Characters of each payload. */
  readonly payloadChars: number;
  /** Bytes per second at most (spreads the volume over the faults). */
  readonly bytesPerSecond: number;
  /** One record in this many is not JSON: it must end as a dead letter, not as a row. */
  readonly badEvery: number;
  readonly seed: number;
  /** The value sent for a good record (a registry format's serializer); default: its JSON. */
  readonly encode?: (record: ChecksummedRecord) => Promise<Buffer>;
}

export interface Production {
  /** Records acknowledged by the broker so far (a retried batch may be in the log twice: the log is the reference). */
  readonly acked: () => number;
  readonly bytes: () => number;
  readonly bad: () => number;
  /** Send attempts that failed and were retried (broker outage). */
  readonly retries: () => number;
  readonly done: Promise<void>;
  stop(): void;
}

const BATCH = 32;

/**
 * Produces checksummed JSON records round-robin over the partitions at a bounded rate.
 * A failed send (the broker is down) is retried with a new producer until it succeeds
 * or the production is stopped: the campaign never gives up on its own records, and
 * the final check counts what the log holds, not what was sent.
 */
export function startProduction(o: ProductionOptions): Production {
  const random = new Random(o.seed ^ 0x5eed);
  let acked = 0;
  let bytes = 0;
  let bad = 0;
  let retries = 0;
  let stopped = false;
  const kafka = new Kafka({
    clientId: 'kafka-lance-qualify-producer',
    brokers: [...o.brokers],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 3_000,
    retry: { retries: 3, initialRetryTime: 300 },
  });
  let producer: Producer | undefined;
  const send = async (messages: { partition: number; value: string | Buffer }[]) => {
    for (;;) {
      try {
        if (!producer) {
          producer = kafka.producer({ allowAutoTopicCreation: false });
          await producer.connect();
        }
        await producer.send({ topic: o.topic, acks: -1, messages });
        return;
      } catch {
        retries += 1;
        await producer?.disconnect().catch(() => undefined);
        producer = undefined;
        if (stopped) return;
        await sleep(1_000);
      }
    }
  };
  const done = (async () => {
    const started = Date.now();
    let n = 0;
    while (bytes < o.totalBytes && !stopped) {
      const messages: { partition: number; value: string | Buffer }[] = [];
      let batchBytes = 0;
      for (let i = 0; i < BATCH && bytes + batchBytes < o.totalBytes; i++, n++) {
        let value: string | Buffer;
        if (n % o.badEvery === o.badEvery - 1) {
          value = notJson(n);
          bad += 1;
        } else if (o.encode) value = await o.encode(checksummedRecord(random, n, o.payloadChars));
        else value = checksummedValue(random, n, o.payloadChars);
        messages.push({ partition: n % o.partitions, value });
        batchBytes += value.length;
      }
      await send(messages);
      acked += messages.length;
      bytes += batchBytes;
      const ahead = (bytes / o.bytesPerSecond) * 1000 - (Date.now() - started);
      if (ahead > 0) await sleep(ahead);
    }
    await producer?.disconnect().catch(() => undefined);
  })();
  return {
    acked: () => acked,
    bytes: () => bytes,
    bad: () => bad,
    retries: () => retries,
    done,
    stop: () => {
      stopped = true;
    },
  };
}

/** A record value `{n, payload, sha}` with a seeded payload of `chars` characters. */
export function checksummedValue(random: Random, n: number, chars: number): string {
  return JSON.stringify(checksummedRecord(random, n, chars));
}

/** The record `{n, payload, sha}` with a seeded payload of `chars` characters. */
export function checksummedRecord(random: Random, n: number, chars: number): ChecksummedRecord {
  const payload = randomText(random, chars);
  return { n, payload, sha: sha256(payload) };
}

/** A record value that is not JSON: it must end as a dead letter, not as a row. */
export function notJson(n: number): string {
  return `{"n":${n},"payload":"not json`;
}

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Seeded printable text (JSON-safe, no escapes): payload bytes the checksum covers. */
function randomText(random: Random, chars: number): string {
  const out = new Array<string>(chars);
  for (let i = 0; i < chars; i++) out[i] = ALPHABET[Math.floor(random.next() * 64)]!;
  return out.join('');
}
