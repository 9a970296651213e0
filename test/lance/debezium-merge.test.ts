import * as lancedb from '@lancedb/lancedb';
import { MergeInsertBuilder } from '@lancedb/lancedb';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import type { RecordBatch } from 'apache-arrow';
import { resolveConsumer } from '../../src/config';
import { silentLogger } from '../../src/common/logger';
import { RecordDecoder, type RawMessage } from '../../src/decode/record-decoder';
import { LanceTable, type LanceTarget, type Written } from '../../src/lance/lance-table';
import { mergeNewest } from '../../src/lance/upsert-merge';
import { reduceToNewest } from '../../src/lance/upsert-reduce';
import { tempDir } from '../support/rows';

/**
 * Debezium change events merged into real LanceDB tables on disk. Updates whose unchanged
 * TOASTed column arrives as `__debezium_unavailable_value` (PostgreSQL's REPLICA IDENTITY
 * DEFAULT): the stored value stays, from an earlier record of the key in the same publication
 * or from the table; a replay changes nothing, a newer row stays, and a row another owner
 * wrote between the merge's read and its commit is not overwritten with the value from before
 * it. Truncates: the rows before one are deleted in one commit, the rows after it stay, and a
 * replay of older records brings nothing back.
 */
const TOPIC = 'pg.public.docs';
const TOPIC_ID = 'AAAAAAAAAAAAAAAAAAAAAA';
const T0 = Date.UTC(2026, 11, 6, 12);
const PLACEHOLDER = '__debezium_unavailable_value';
const enc = (s: string) => new TextEncoder().encode(s);

type Doc = { id: number; name: string; note?: string | null };
type Event = readonly [offset: number, op: 'c' | 'u' | 'd', row: Doc] | readonly [offset: number, op: 't'];

const decoder = (sequence?: string) =>
  new RecordDecoder(
    resolveConsumer(
      {
        ...(sequence ? { sequence } : {}),
        name: 'docs',
        brokers: ['127.0.0.1:1'],
        topics: [TOPIC],
        schema: { fields: { id: 'int64', name: 'string', note: 'string' } },
        mode: 'upsert',
        key: { fields: ['id'] },
        envelope: 'debezium',
        truncate: 'apply',
      },
      'test',
    ),
    () => T0,
  );

/** Each event's `source.lsn` and Kafka timestamp; by default both follow the offset. */
interface Ordering {
  readonly lsn?: (offset: number) => number;
  readonly at?: (offset: number) => number;
  readonly sequence?: string;
}

function batchOf(events: readonly Event[], partition = 0, order: Ordering = {}): RecordBatch {
  const messages: RawMessage[] = events.map(([offset, op, row]) => ({
    offsetNumber: offset,
    timestampNumber: order.at?.(offset) ?? T0 + offset,
    // A truncate names no row: no key (Debezium's truncate events have none).
    key: row ? enc(JSON.stringify({ id: row.id })) : null,
    value: enc(
      JSON.stringify({
        op,
        before: op === 'd' ? { id: row?.id } : null,
        after: op === 'd' || !row ? null : row,
        source: { lsn: order.lsn?.(offset) ?? offset },
      }),
    ),
  }));
  const decoded = decoder(order.sequence).decode(TOPIC, partition, messages, TOPIC_ID);
  if (decoded.deadLetters.length > 0) throw new Error(JSON.stringify(decoded.deadLetters));
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

/** id → [name, note] as a reader sees the table (`_deleted = false`), and the row count. */
async function read(
  target: LanceTarget,
): Promise<{ live: Map<number, [string, string | null]>; rows: number }> {
  const db = await lancedb.connect(target.uri);
  try {
    const table = await db.openTable(target.table);
    const rows = (await table.query().where('_deleted = false').toArray()) as {
      id: bigint;
      name: string;
      note: string | null;
    }[];
    return {
      live: new Map(rows.map((r) => [Number(r.id), [r.name, r.note]])),
      rows: await table.countRows(),
    };
  } finally {
    db.close();
  }
}

let dir: string;
let target: LanceTarget;
beforeEach(async () => {
  dir = await tempDir('kl-toast');
  target = { uri: path.join(dir, 'lance'), table: 'docs' };
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

const connect = () =>
  LanceTable.connect(target, silentLogger(), { upsertKey: ['id'], toastPlaceholders: true });

test('an update whose TOASTed column is the placeholder keeps the stored value: from the table, and from an earlier record of the key in the same publication', async () => {
  const lance = await connect();
  await publish(lance, [
    batchOf([
      [0, 'c', { id: 1, name: 'one', note: 'long text 1' }],
      [1, 'c', { id: 2, name: 'two', note: 'long text 2' }],
      [2, 'c', { id: 3, name: 'three', note: null }],
    ]),
  ]);
  await publish(lance, [
    batchOf([
      // From the table.
      [3, 'u', { id: 1, name: 'one b', note: PLACEHOLDER }],
      // From the record before it in this publication, not the table's older value.
      [4, 'u', { id: 2, name: 'two b', note: 'edited 2' }],
      [5, 'u', { id: 2, name: 'two c', note: PLACEHOLDER }],
      // A stored null stays null.
      [6, 'u', { id: 3, name: 'three b', note: PLACEHOLDER }],
      // A key created in this publication.
      [7, 'c', { id: 4, name: 'four', note: 'long text 4' }],
      [8, 'u', { id: 4, name: 'four b', note: PLACEHOLDER }],
    ]),
  ]);
  const { live } = await read(target);
  expect(live).toEqual(
    new Map([
      [1, ['one b', 'long text 1']],
      [2, ['two c', 'edited 2']],
      [3, ['three b', null]],
      [4, ['four b', 'long text 4']],
    ]),
  );
  lance.close();
}, 60_000);

test('a placeholder is never written: a key deleted before it (within the publication or in the table) or never seen reads null', async () => {
  const lance = await connect();
  await publish(lance, [batchOf([[0, 'c', { id: 1, name: 'one', note: 'text' }]])]);
  await publish(lance, [batchOf([[1, 'd', { id: 1, name: '' }]])]);
  await publish(lance, [
    batchOf([
      [2, 'u', { id: 1, name: 'one again', note: PLACEHOLDER }],
      [3, 'u', { id: 9, name: 'nine', note: PLACEHOLDER }],
    ]),
  ]);
  const { live } = await read(target);
  expect(live).toEqual(
    new Map([
      [1, ['one again', null]],
      [9, ['nine', null]],
    ]),
  );
  lance.close();
}, 60_000);

test('with placeholders, a replay changes nothing and a newer row stays', async () => {
  const lance = await connect();
  const first = [batchOf([[0, 'c', { id: 1, name: 'one', note: 'text 0' }]])];
  const update = [batchOf([[5, 'u', { id: 1, name: 'one at 5', note: PLACEHOLDER }]])];
  await publish(lance, first);
  await publish(lance, update);
  // The update again (a replay after a crash), and a zombie's older record of the key.
  const replay = await publish(lance, update);
  const older = await publish(lance, [batchOf([[3, 'u', { id: 1, name: 'one at 3', note: 'text 3' }]])]);
  expect(replay.merge).toMatchObject({ inserted: 0, updated: 0 });
  expect(older.merge).toMatchObject({ inserted: 0, updated: 0 });
  const { live, rows } = await read(target);
  expect(live).toEqual(new Map([[1, ['one at 5', 'text 0']]]));
  expect(rows).toBe(1);
  lance.close();
}, 60_000);

test('a row an older record wrote between the merge’s read and its commit is not overwritten with the value from before it: the update is merged again from that row', async () => {
  const lance = await connect();
  await publish(lance, [batchOf([[0, 'c', { id: 1, name: 'one', note: 'text 0' }]])]);
  lance.close();
  const db = await lancedb.connect(target.uri);
  const table = await db.openTable('docs');
  // Another owner's publication of offset 3 (a new note) lands just after this merge read
  // the key's row (offset 0) for the placeholder of offset 5.
  const intermediate = reduceToNewest(
    [batchOf([[3, 'u', { id: 1, name: 'one at 3', note: 'text 3' }]])],
    ['id'],
  );
  let interleaved = false;
  const racing = new Proxy(table, {
    get(t, property, receiver) {
      if (property === 'mergeInsert' && !interleaved) {
        interleaved = true;
        // The builder's chain, its execute preceded by the other owner's merge.
        const wrap = (builder: MergeInsertBuilder): MergeInsertBuilder =>
          new Proxy(builder, {
            get(b, name) {
              if (name === 'execute')
                return async (...args: Parameters<MergeInsertBuilder['execute']>) => {
                  await mergeNewest(t, ['id'], intermediate, false);
                  return b.execute(...args);
                };
              const step = Reflect.get(b, name) as unknown;
              if (typeof step !== 'function') return step;
              return (...args: unknown[]) => {
                const next = (step as (...a: unknown[]) => unknown).apply(b, args);
                return next instanceof MergeInsertBuilder ? wrap(next) : next;
              };
            },
          });
        return (on: string | string[]) => wrap(t.mergeInsert(on));
      }
      const value = Reflect.get(t, property, receiver) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(t) : value;
    },
  });
  const update = reduceToNewest(
    [batchOf([[5, 'u', { id: 1, name: 'one at 5', note: PLACEHOLDER }]])],
    ['id'],
  );
  expect(update.unavailable).toHaveLength(1);
  await mergeNewest(racing, ['id'], update, false);
  expect(interleaved).toBe(true);
  db.close();
  const { live } = await read(target);
  expect(live).toEqual(new Map([[1, ['one at 5', 'text 3']]]));
}, 60_000);

test('a truncate deletes every row written before it, in the table and in its own publication, in one commit; the rows after it stay', async () => {
  const lance = await connect();
  await publish(lance, [
    batchOf([
      [0, 'c', { id: 1, name: 'one', note: 'a' }],
      [1, 'c', { id: 2, name: 'two', note: 'b' }],
      [2, 'c', { id: 3, name: 'three', note: 'c' }],
    ]),
  ]);
  const db = await lancedb.connect(target.uri);
  const table = await db.openTable('docs');
  const before = await table.version();
  const written = await publish(lance, [
    batchOf([
      [3, 'u', { id: 2, name: 'two b', note: 'b2' }],
      [4, 't'],
      [5, 'c', { id: 5, name: 'five', note: 'e' }],
      [6, 'c', { id: 1, name: 'one again', note: 'a2' }],
    ]),
  ]);
  // Keys 1 and 5 written after it; 2 (also in the publication, before it) and 3 (the table's) deleted.
  expect(written.merge).toMatchObject({ deletes: 2 });
  const { live, rows } = await read(target);
  expect(live).toEqual(
    new Map([
      [1, ['one again', 'a2']],
      [5, ['five', 'e']],
    ]),
  );
  expect(rows).toBe(4);
  // Every version between: the table before the publication, or after it whole.
  await table.checkoutLatest();
  const after = await table.version();
  for (let v = before; v <= after; v++) {
    await table.checkout(v);
    const ids = ((await table.query().where('_deleted = false').select(['id']).toArray()) as { id: bigint }[])
      .map((r) => Number(r.id))
      .sort();
    expect([
      [1, 2, 3],
      [1, 5],
    ]).toContainEqual(ids);
  }
  db.close();
  lance.close();
}, 60_000);

test('after a truncate, a replay of the publications before it and a zombie’s older record bring no row back', async () => {
  const lance = await connect();
  const first = [
    batchOf([
      [0, 'c', { id: 1, name: 'one', note: 'a' }],
      [1, 'c', { id: 2, name: 'two', note: 'b' }],
    ]),
  ];
  await publish(lance, first);
  await publish(lance, [batchOf([[2, 't']])]);
  await publish(lance, [batchOf([[3, 'c', { id: 2, name: 'two again', note: 'b2' }]])]);
  const replay = await publish(lance, first);
  const zombie = await publish(lance, [batchOf([[1, 'u', { id: 1, name: 'one late', note: 'z' }]])]);
  // The truncate itself again: nothing older is left to delete, the newer key stays.
  const again = await publish(lance, [batchOf([[2, 't']])]);
  expect(replay.merge).toMatchObject({ inserted: 0, updated: 0 });
  expect(zombie.merge).toMatchObject({ inserted: 0, updated: 0 });
  expect(again.merge).toMatchObject({ inserted: 0, updated: 0 });
  const { live } = await read(target);
  expect(live).toEqual(new Map([[2, ['two again', 'b2']]]));
  lance.close();
}, 60_000);

test('with a source sequence (source.lsn) a key keeps the record with the newer LSN, whatever the Kafka order says; without one, the Kafka order decides', async () => {
  // Key 1 written at partition 0 (LSN 500), then a record of it with an older LSN (400) in
  // partition 1 at a later time (a connector restarted onto a topic of more partitions, say);
  // key 2 deleted at LSN 900, then an upsert with LSN 800 later in the same partition.
  const lsns: Record<number, number> = { 10: 500, 11: 900, 3: 400, 12: 800 };
  const run = async (sequence: string | undefined) => {
    const order: Ordering = { lsn: (o) => lsns[o]!, at: (o) => (o === 3 ? T0 + 1_000 : T0 + o), sequence };
    const newer = batchOf(
      [
        [10, 'c', { id: 1, name: 'lsn 500', note: null }],
        [11, 'd', { id: 2, name: '' }],
      ],
      0,
      order,
    );
    const older = batchOf([[3, 'u', { id: 1, name: 'lsn 400', note: null }]], 1, order);
    const olderInPartition = batchOf([[12, 'u', { id: 2, name: 'lsn 800', note: null }]], 0, order);
    // Across publications (the merge's condition), in both orders.
    const lance = await connect();
    await publish(lance, [newer]);
    await publish(lance, [older]);
    await publish(lance, [olderInPartition]);
    await publish(lance, [newer]); // a replay
    const merged = (await read(target)).live;
    lance.close();
    await fsp.rm(target.uri, { recursive: true, force: true });
    // Within one publication (the reduction).
    const again = await connect();
    await publish(again, [older, newer, olderInPartition]);
    const reduced = (await read(target)).live;
    again.close();
    await fsp.rm(target.uri, { recursive: true, force: true });
    return { merged, reduced };
  };
  const bySequence = await run('source.lsn');
  expect(bySequence.merged).toEqual(new Map([[1, ['lsn 500', null]]]));
  expect(bySequence.reduced).toEqual(bySequence.merged);
  const byKafka = await run(undefined);
  expect(byKafka.merged).toEqual(
    new Map([
      [1, ['lsn 400', null]],
      [2, ['lsn 800', null]],
    ]),
  );
  expect(byKafka.reduced).toEqual(byKafka.merged);
}, 60_000);

test('a placeholder and a truncate reach the table’s rows by key columns of any spelling (mixed case)', async () => {
  const mixed = new RecordDecoder(
    resolveConsumer(
      {
        name: 'docs',
        brokers: ['127.0.0.1:1'],
        topics: [TOPIC],
        schema: { fields: { DocId: 'int64', Body: 'string' } },
        mode: 'upsert',
        key: { fields: ['DocId'] },
        envelope: 'debezium',
        truncate: 'apply',
      },
      'test',
    ),
    () => T0,
  );
  const batch = (offset: number, op: string, after: Record<string, unknown> | null) => {
    const decoded = mixed.decode(
      TOPIC,
      0,
      [
        {
          offsetNumber: offset,
          timestampNumber: T0 + offset,
          key: after ? enc(JSON.stringify({ DocId: after.DocId })) : null,
          value: enc(JSON.stringify({ op, before: null, after, source: { lsn: offset } })),
        },
      ],
      TOPIC_ID,
    );
    if (decoded.deadLetters.length > 0) throw new Error(JSON.stringify(decoded.deadLetters));
    return decoded.batch!;
  };
  const lance = await LanceTable.connect(target, silentLogger(), {
    upsertKey: ['DocId'],
    toastPlaceholders: true,
  });
  await publish(lance, [batch(0, 'c', { DocId: 1, Body: 'long body' })]);
  await publish(lance, [batch(1, 'u', { DocId: 1, Body: PLACEHOLDER })]);
  await publish(lance, [batch(2, 'c', { DocId: 2, Body: 'two' })]);
  const db = await lancedb.connect(target.uri);
  const table = await db.openTable('docs');
  const bodies = async () =>
    ((await table.query().where('_deleted = false').toArray()) as { DocId: bigint; Body: string }[])
      .map((r) => [Number(r.DocId), r.Body])
      .sort();
  expect(await bodies()).toEqual([
    [1, 'long body'],
    [2, 'two'],
  ]);
  await publish(lance, [batch(3, 't', null)]);
  await table.checkoutLatest();
  expect(await bodies()).toEqual([]);
  db.close();
  lance.close();
}, 60_000);

/** A decoder of Debezium events for a `docs` table of these fields, keyed by `id`. */
const debeziumDecoder = (fields: Record<string, unknown>) =>
  new RecordDecoder(
    resolveConsumer(
      {
        name: 'docs',
        brokers: ['127.0.0.1:1'],
        topics: [TOPIC],
        schema: { fields: { id: 'int64', ...fields } },
        mode: 'upsert',
        key: { fields: ['id'] },
        envelope: 'debezium',
      },
      'test',
    ),
    () => T0,
  );

/** `c` and `u` events of `after` rows (keyed by their id, `source.lsn` their offset), decoded: none a dead letter. */
function decodedUpserts(
  decoder: RecordDecoder,
  rows: readonly (readonly [offset: number, op: 'c' | 'u', after: Record<string, unknown>])[],
): RecordBatch {
  const decoded = decoder.decode(
    TOPIC,
    0,
    rows.map(([offset, op, after]) => ({
      offsetNumber: offset,
      timestampNumber: T0 + offset,
      key: enc(JSON.stringify({ id: after.id })),
      value: enc(JSON.stringify({ op, before: null, after, source: { lsn: offset } })),
    })),
    TOPIC_ID,
  );
  expect(decoded.deadLetters).toEqual([]);
  return decoded.batch!;
}

/** The rows a reader sees (`_deleted = false`), by id. */
async function liveRows<Row extends { id: bigint }>(): Promise<Row[]> {
  const db = await lancedb.connect(target.uri);
  try {
    const rows = (await (
      await db.openTable(target.table)
    )
      .query()
      .where('_deleted = false')
      .toArray()) as Row[];
    return rows.sort((a, b) => Number(a.id) - Number(b.id));
  } finally {
    db.close();
  }
}

test("a TOASTed bytea's placeholder in a binary column keeps the stored bytes: the update writes every other column and leaves that one", async () => {
  const placeholderBytes = Buffer.from(PLACEHOLDER);
  // JSON's bytes are base64 (binary.handling.mode bytes or base64); hex arrives as its text too.
  const batch = decodedUpserts(debeziumDecoder({ name: 'string', blob: 'binary' }), [
    [0, 'c', { id: 1, name: 'one', blob: Buffer.from('stored 1').toString('base64') }],
    [1, 'c', { id: 2, name: 'two', blob: Buffer.from('stored 2').toString('base64') }],
    [2, 'u', { id: 1, name: 'one b', blob: placeholderBytes.toString('base64') }],
    [3, 'u', { id: 2, name: 'two b', blob: placeholderBytes.toString('hex') }],
  ]);
  const lance = await connect();
  // The creates first, then the updates: the stored bytes come from the table's rows.
  await publish(lance, [batch.slice(0, 2)]);
  await publish(lance, [batch.slice(2, 4)]);
  lance.close();
  const live = await liveRows<{ id: bigint; name: string; blob: Uint8Array | null }>();
  expect(live.map((r) => [Number(r.id), r.name, r.blob && Buffer.from(r.blob).toString()])).toEqual([
    [1, 'one b', 'stored 1'],
    [2, 'two b', 'stored 2'],
  ]);
}, 60_000);

test("a TOASTed array's placeholder (a text[] of it, an int[] of its bytes) in a list column keeps the stored list", async () => {
  const placeholderBytes = [...Buffer.from(PLACEHOLDER)];
  const fields = {
    name: 'string',
    tags: { type: 'list', items: 'string' },
    nums: { type: 'list', items: 'int32' },
  };
  const batch = decodedUpserts(debeziumDecoder(fields), [
    [0, 'c', { id: 1, name: 'one', tags: ['a', 'b'], nums: [1, 2, 3] }],
    [1, 'u', { id: 1, name: 'one b', tags: [PLACEHOLDER], nums: placeholderBytes }],
    // In one publication: from the key's earlier record there.
    [2, 'c', { id: 2, name: 'two', tags: ['c'], nums: [4] }],
    [3, 'u', { id: 2, name: 'two b', tags: [PLACEHOLDER], nums: placeholderBytes }],
  ]);
  const lance = await connect();
  await publish(lance, [batch.slice(0, 1)]);
  await publish(lance, [batch.slice(1, 4)]);
  lance.close();
  const live = await liveRows<{
    id: bigint;
    name: string;
    tags: Iterable<string> | null;
    nums: Iterable<number> | null;
  }>();
  expect(live.map((r) => [Number(r.id), r.name, r.tags && [...r.tags], r.nums && [...r.nums]])).toEqual([
    [1, 'one b', ['a', 'b'], [1, 2, 3]],
    [2, 'two b', ['c'], [4]],
  ]);
}, 60_000);
