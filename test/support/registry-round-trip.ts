import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import * as lancedb from '@lancedb/lancedb';
import { openTableIfCommitted } from '../../src/lance/open-if-committed';
import type { Table } from 'apache-arrow';
import { ensureIndependentReader, VENV } from '../../qualify/support/independent-reader';
import { QUALIFY_DIR } from '../../qualify/support/paths';
import { parseJsonExact } from '../../src/decode/exact-json';
import { topicAndConsumer, type BrokerSuite, type TestConsumer } from './broker-suite';

/**
 * What the registry-format round trips (test/integration/schema-registry-*.test.ts) share:
 * a consumer of a registry format, a producer of framed values, the Lance table read back
 * by LanceDB and by pylance, and the dead-letter file.
 */

export interface DeadLetter {
  readonly offset: number;
  readonly reason: string;
  readonly detail: string;
}

export async function until<T>(
  read: () => Promise<T | undefined>,
  what: string,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

export async function registryConsumer(
  suite: BrokerSuite,
  format: 'avro' | 'protobuf' | 'json-schema',
  url: string,
  extra: Record<string, unknown> = {},
): Promise<TestConsumer> {
  return topicAndConsumer(suite, 1, {
    format,
    schema: 'infer',
    schemaRegistry: { url, requestTimeoutMs: 2_000 },
    errors: { tolerance: 'all' },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
    ...extra,
  });
}

export async function produce(
  suite: BrokerSuite,
  topic: string,
  values: readonly (Buffer | { key: Buffer | null; value: Buffer })[],
): Promise<void> {
  const producer = suite.kafka.producer();
  await producer.connect();
  await producer.send({
    topic,
    acks: -1,
    messages: values.map((v) => (Buffer.isBuffer(v) ? { partition: 0, value: v } : { partition: 0, ...v })),
  });
  await producer.disconnect();
}

/** The table once it holds `rows` rows (LanceDB for Node). */
export async function lanceRows(dataDir: string, rows: number, timeoutMs = 60_000): Promise<Table> {
  return until(
    async () => {
      const db = await lancedb.connect(path.join(dataDir, 'lance'), { readConsistencyInterval: 0 });
      try {
        const t = await openTableIfCommitted(db, 'logs');
        if (!t) return undefined;
        const table = await t.query().toArrow();
        t.close();
        return table.numRows >= rows ? table : undefined;
      } finally {
        db.close();
      }
    },
    `${rows} rows in Lance`,
    timeoutMs,
  );
}

export async function deadLetters(suite: BrokerSuite, consumer: TestConsumer): Promise<DeadLetter[]> {
  const text = await fsp
    .readFile(path.join(suite.work, `${consumer.name}.dlq.jsonl`), 'utf8')
    .catch(() => '');
  return text
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as DeadLetter);
}

/** The rows as pylance (qualify/.venv, the qualification's independent reader) reads them, by offset. */
export async function pylanceRows(dataDir: string): Promise<Record<string, unknown>[]> {
  await ensureIndependentReader(() => undefined);
  const { stdout } = await promisify(execFile)(
    path.join(VENV, 'bin/python'),
    [path.join(QUALIFY_DIR, 'dump_columns.py'), '--dataset', path.join(dataDir, 'lance', 'logs.lance')],
    { maxBuffer: 16 * 1024 * 1024 },
  );
  return (parseJsonExact(stdout) as { rows: Record<string, unknown>[] }).rows;
}

/**
 * A value as plainColumn (avro-fixtures.ts) gives it, as qualify/dump_columns.py prints
 * it: timestamps as their integers, other 64-bit integers as digit strings, bytes as base64.
 */
export function asPylance(value: unknown, arrowType: string): unknown {
  if (value === null) return null;
  if (arrowType === 'Binary') return Buffer.from(value as number[]).toString('base64');
  if (arrowType.startsWith('Timestamp')) return Number(value);
  return digits64(value);
}

function digits64(value: unknown): unknown {
  if (typeof value === 'bigint') return String(value);
  if (Array.isArray(value)) return value.map(digits64);
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, x]) => [k, digits64(x)]));
  return value;
}
