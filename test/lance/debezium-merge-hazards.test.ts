import * as lancedb from '@lancedb/lancedb';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import type { RecordBatch } from 'apache-arrow';
import { resolveConsumer } from '../../src/config';
import { silentLogger } from '../../src/common/logger';
import { RecordDecoder, type RawMessage } from '../../src/decode/record-decoder';
import { LanceTable, type LanceTarget, type Written } from '../../src/lance/lance-table';
import { compact } from '../../src/cli/compact';
import { tempDir } from '../support/rows';

/**
 * Debezium publications whose size or reach once broke the merge, on real LanceDB tables:
 * tens of thousands of TOASTed placeholders in one publication (a condition of one guard per
 * row crashed LanceDB), and a truncate that reached the rows of another topic.
 */
const TOPIC_ID = 'AAAAAAAAAAAAAAAAAAAAAA';
const T0 = Date.UTC(2026, 11, 6, 12);
const PLACEHOLDER = '__debezium_unavailable_value';
const enc = (s: string) => new TextEncoder().encode(s);

type Event = { offset: number; op: 'c' | 'u' | 't'; id?: number; note?: string; lsn?: number };

const definition = (topic: string, sequence?: 'source.lsn') =>
  resolveConsumer(
    {
      ...(sequence ? { sequence } : {}),
      name: 'docs',
      brokers: ['127.0.0.1:1'],
      topics: [topic],
      schema: { fields: { id: 'int64', note: 'string' } },
      mode: 'upsert',
      key: { fields: ['id'] },
      envelope: 'debezium',
      truncate: 'apply',
      ...(target ? { lance: { uri: target.uri }, table: target.table } : {}),
    },
    'test',
  );
const decoder = (topic: string, sequence?: 'source.lsn') =>
  new RecordDecoder(definition(topic, sequence), () => T0);

function batchOf(topic: string, events: readonly Event[], sequence?: 'source.lsn'): RecordBatch {
  const messages: RawMessage[] = events.map((e) => ({
    offsetNumber: e.offset,
    timestampNumber: T0 + e.offset,
    key: e.id === undefined ? null : enc(JSON.stringify({ id: e.id })),
    value: enc(
      JSON.stringify({
        op: e.op,
        before: null,
        after: e.id === undefined ? null : { id: e.id, note: e.note },
        source: { lsn: e.lsn ?? e.offset },
      }),
    ),
  }));
  const decoded = decoder(topic, sequence).decode(topic, 0, messages, TOPIC_ID);
  if (decoded.deadLetters.length > 0) throw new Error(JSON.stringify(decoded.deadLetters.slice(0, 3)));
  return decoded.batch!;
}

async function publish(lance: LanceTable, batches: readonly RecordBatch[]): Promise<Written> {
  return lance.append({
    batches: (async function* () {
      yield* await Promise.resolve(batches);
    })(),
    mode: 'upsert',
  });
}

let dir: string;
let target: LanceTarget;
beforeEach(async () => {
  dir = await tempDir('kl-cdc-hazards');
  target = { uri: path.join(dir, 'lance'), table: 'docs' };
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

const connect = () =>
  LanceTable.connect(target, silentLogger(), { upsertKey: ['id'], toastPlaceholders: true });

async function rows(where: string, columns: string[]): Promise<Record<string, unknown>[]> {
  const db = await lancedb.connect(target.uri);
  try {
    const table = await db.openTable(target.table);
    return (await table.query().where(where).select(columns).toArray()) as Record<string, unknown>[];
  } finally {
    db.close();
  }
}

test('forty thousand placeholder updates in one publication keep every stored value (no merge condition or key filter grows with the rows: one guard per row crashed LanceDB)', async () => {
  const n = 40_000;
  const lance = await connect();
  const note = (i: number) => `note ${i} `.repeat(4);
  await publish(lance, [
    batchOf(
      'pg.public.docs',
      Array.from({ length: n }, (_, i) => ({ offset: i, op: 'c' as const, id: i, note: note(i) })),
    ),
  ]);
  const written = await publish(lance, [
    batchOf(
      'pg.public.docs',
      Array.from({ length: n }, (_, i) => ({ offset: n + i, op: 'u' as const, id: i, note: PLACEHOLDER })),
    ),
  ]);
  expect(written.merge).toMatchObject({ inserted: 0, updated: n });
  const live = await rows('_deleted = false', ['id', 'note', '_offset']);
  expect(live).toHaveLength(n);
  const wrong = live.filter((r) => r.note !== note(Number(r.id)) || Number(r._offset) !== n + Number(r.id));
  expect(wrong).toEqual([]);
  lance.close();
}, 900_000);

test('a truncate deletes the rows of its own topic only; another topic’s rows in the table stay', async () => {
  const lance = await connect();
  await publish(lance, [batchOf('pg.other.docs', [{ offset: 0, op: 'c', id: 7, note: 'other topic' }])]);
  await publish(lance, [batchOf('pg.public.docs', [{ offset: 0, op: 'c', id: 1, note: 'truncated' }])]);
  await publish(lance, [batchOf('pg.public.docs', [{ offset: 1, op: 't' }])]);
  const live = await rows('_deleted = false', ['id', 'note', '_topic']);
  expect(live.map((r) => [Number(r.id), r.note, r._topic])).toEqual([[7, 'other topic', 'pg.other.docs']]);
  lance.close();
}, 60_000);

test('with a sequence, a truncate’s delete rows carry its source.lsn in _sequence (so a key’s older record by LSN loses to them)', async () => {
  const lance = await connect();
  await publish(lance, [
    batchOf(
      'pg.public.docs',
      [
        { offset: 0, op: 'c', id: 1, note: 'a', lsn: 10 },
        { offset: 1, op: 'c', id: 2, note: 'b', lsn: 20 },
      ],
      'source.lsn',
    ),
  ]);
  await publish(lance, [batchOf('pg.public.docs', [{ offset: 2, op: 't', lsn: 50 }], 'source.lsn')]);
  const deleted = await rows('_deleted = true', ['id', '_sequence']);
  expect(deleted.map((r) => [Number(r.id), r._sequence]).sort()).toEqual([
    [1, 50n],
    [2, 50n],
  ]);
  // A record of key 1 older by LSN (40) but later in Kafka's order brings nothing back.
  await publish(lance, [
    batchOf('pg.public.docs', [{ offset: 3, op: 'c', id: 1, note: 'stale', lsn: 40 }], 'source.lsn'),
  ]);
  expect(await rows('_deleted = false', ['id'])).toEqual([]);
  lance.close();
}, 60_000);

test('compact --purge-deletes-older-than purges a truncate’s aged delete rows and keeps a younger delete row at the same position (matched by key too)', async () => {
  const lance = await connect();
  await publish(lance, [
    batchOf('pg.public.docs', [
      { offset: 0, op: 'c', id: 1, note: 'a' },
      { offset: 1, op: 'c', id: 2, note: 'b' },
    ]),
  ]);
  const truncate = [batchOf('pg.public.docs', [{ offset: 5, op: 't' }])];
  await publish(lance, truncate);
  await new Promise((resolve) => setTimeout(resolve, 50));
  const cutoff = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 50));
  // Key 3's record older than the truncate lands late, and the truncate's replay deletes it:
  // a delete row at the truncate's position that landed after the cutoff.
  await publish(lance, [batchOf('pg.public.docs', [{ offset: 3, op: 'c', id: 3, note: 'late' }])]);
  await publish(lance, truncate);
  lance.close();
  expect(
    (await rows('_deleted = true', ['id', '_offset'])).map((r) => [Number(r.id), Number(r._offset)]).sort(),
  ).toEqual([
    [1, 5],
    [2, 5],
    [3, 5],
  ]);
  const result = await compact(definition('pg.public.docs'), 0, cutoff);
  expect(result.purgedDeletes).toBe(2);
  expect((await rows('_deleted = true', ['id'])).map((r) => Number(r.id))).toEqual([3]);
}, 60_000);

test('a composite key’s placeholders read their own rows: the key columns’ value lists cross (tenant a with id 2 is read too) and only exact keys are taken', async () => {
  const topic = 'pg.public.accounts';
  const composite = new RecordDecoder(
    resolveConsumer(
      {
        name: 'docs',
        brokers: ['127.0.0.1:1'],
        topics: [topic],
        schema: { fields: { tenant: 'string', id: 'int64', note: 'string' } },
        mode: 'upsert',
        key: { fields: ['tenant', 'id'] },
        envelope: 'debezium',
      },
      'test',
    ),
    () => T0,
  );
  const batch = (events: readonly [number, 'c' | 'u', string, number, string][]) => {
    const decoded = composite.decode(
      topic,
      0,
      events.map(([offset, op, tenant, id, note]) => ({
        offsetNumber: offset,
        timestampNumber: T0 + offset,
        key: enc(JSON.stringify({ tenant, id })),
        value: enc(
          JSON.stringify({ op, before: null, after: { tenant, id, note }, source: { lsn: offset } }),
        ),
      })),
      TOPIC_ID,
    );
    if (decoded.deadLetters.length > 0) throw new Error(JSON.stringify(decoded.deadLetters));
    return decoded.batch!;
  };
  const lance = await LanceTable.connect(target, silentLogger(), {
    upsertKey: ['tenant', 'id'],
    toastPlaceholders: true,
  });
  await publish(lance, [
    batch([
      [0, 'c', 'a', 1, 'a1'],
      [1, 'c', 'b', 2, 'b2'],
      [2, 'c', 'a', 2, 'a2'],
      [3, 'c', 'b', 1, 'b1'],
    ]),
  ]);
  await publish(lance, [
    batch([
      [4, 'u', 'a', 1, PLACEHOLDER],
      [5, 'u', 'b', 2, PLACEHOLDER],
    ]),
  ]);
  const live = await rows('_deleted = false', ['tenant', 'id', 'note']);
  expect(live.map((r) => `${String(r.tenant)}${Number(r.id)}=${String(r.note)}`).sort()).toEqual([
    'a1=a1',
    'a2=a2',
    'b1=b1',
    'b2=b2',
  ]);
  lance.close();
}, 60_000);

test('a flattened record (ExtractNewRecordState) keyed on a binary record key keeps its stored value, the row found by an X-literal filter', async () => {
  const topic = 'pg.public.flat';
  const flat = new RecordDecoder(
    resolveConsumer(
      {
        name: 'docs',
        brokers: ['127.0.0.1:1'],
        topics: [topic],
        schema: { fields: { note: 'string' } },
        mode: 'upsert',
        key: 'record-key',
        keyFormat: 'binary',
      },
      'test',
    ),
    () => T0,
  );
  const batch = (events: readonly [number, string, string][]) => {
    const decoded = flat.decode(
      topic,
      0,
      events.map(([offset, key, note]) => ({
        offsetNumber: offset,
        timestampNumber: T0 + offset,
        key: enc(key),
        value: enc(JSON.stringify({ note })),
      })),
      TOPIC_ID,
    );
    if (decoded.deadLetters.length > 0) throw new Error(JSON.stringify(decoded.deadLetters));
    return decoded.batch!;
  };
  const lance = await LanceTable.connect(target, silentLogger(), {
    upsertKey: ['_key'],
    toastPlaceholders: true,
  });
  await publish(lance, [
    batch([
      [0, 'k1', 'long one'],
      [1, "k'2", 'long two'],
    ]),
  ]);
  await publish(lance, [batch([[2, 'k1', PLACEHOLDER]])]);
  const live = await rows('_deleted = false', ['_key', 'note', '_offset']);
  expect(
    live.map((r) => [Buffer.from(r._key as Uint8Array).toString(), r.note, Number(r._offset)]).sort(),
  ).toEqual([
    ["k'2", 'long two', 1],
    ['k1', 'long one', 2],
  ]);
  lance.close();
}, 60_000);
