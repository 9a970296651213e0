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
import { ReplicaProcess, type Exit } from '../../src/harness/replica-process';
import { plainColumn } from './avro-fixtures';
import { topicAndConsumer, type BrokerSuite, type TestConsumer } from './broker-suite';
import { testBrokers } from './kafka';
import { tempDir } from './rows';

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

/** A framed value whose schema id the registry never gave out (a copy). */
export function withUnknownSchemaId(framed: Uint8Array): Buffer {
  const copy = Buffer.from(framed);
  copy.writeUInt32BE(2_000_000_000, 1);
  return copy;
}

export interface RoundTrip {
  readonly dataDir: string;
  readonly rows: Table;
  readonly letters: DeadLetter[];
  /** How the replica exited its SIGTERM. */
  readonly exit: Exit;
}

/**
 * Runs one replica process of `consumer` on a fresh data directory until its table holds
 * `rows` rows and `letters` dead letters are written, then stops it with SIGTERM.
 */
export async function roundTrip(
  suite: BrokerSuite,
  consumer: TestConsumer,
  name: string,
  want: { readonly rows: number; readonly letters: number },
): Promise<RoundTrip> {
  const dataDir = await tempDir(name);
  const replica = new ReplicaProcess(consumer.file, dataDir, testBrokers());
  const rows = await lanceRows(dataDir, want.rows);
  const letters = await until(async () => {
    const l = await deadLetters(suite, consumer);
    return l.length >= want.letters ? l : undefined;
  }, `${want.letters} dead letters`);
  return { dataDir, rows, letters, exit: await replica.kill('SIGTERM') };
}

/** Each column of `types` has that Arrow type, and each of `expected` those values, as LanceDB reads them. */
export function expectColumns(
  rows: Table,
  types: Readonly<Record<string, string>>,
  expected: Readonly<Record<string, readonly unknown[]>>,
): void {
  for (const [name, type] of Object.entries(types)) {
    expect([name, String(rows.schema.fields.find((f) => f.name === name)?.type)]).toEqual([name, type]);
  }
  for (const [name, values] of Object.entries(expected)) {
    expect([name, plainColumn(rows, name)]).toEqual([name, values]);
  }
}

/** A column's values in offset order. */
export function columnByOffset(rows: Table, name: string): unknown[] {
  const offsets = plainColumn(rows, '_offset').map(Number);
  const values = plainColumn(rows, name);
  return offsets
    .map((o, i) => [o, values[i]] as const)
    .sort((a, b) => a[0] - b[0])
    .map(([, v]) => v);
}

/** The same values as pylance (the qualification's independent reader) reads them. */
export async function expectPylanceColumns(
  dataDir: string,
  types: Readonly<Record<string, string>>,
  expected: Readonly<Record<string, readonly unknown[]>>,
): Promise<void> {
  const read = await pylanceRows(dataDir);
  for (const [name, values] of Object.entries(expected)) {
    const type = types[name]!;
    expect([name, read.map((r) => r[name])]).toEqual([name, values.map((v) => asPylance(v, type))]);
  }
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
