import * as lancedb from '@lancedb/lancedb';
import { MergeInsertBuilder } from '@lancedb/lancedb';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import type { RecordBatch } from 'apache-arrow';
import { resolveConsumer, type ConsumerDefinitionInput } from '../../src/config';
import { silentLogger } from '../../src/common/logger';
import { RecordDecoder, type RawMessage } from '../../src/decode/record-decoder';
import { LanceTable, type LanceTarget, type Written } from '../../src/lance/lance-table';
import { keyIdentity } from '../../src/lance/upsert-keys';
import { newer } from '../../src/lance/upsert-order';
import { reduceToNewest } from '../../src/lance/upsert-reduce';
import { tempDir } from '../support/rows';
import { checkTableMode } from '../../src/replica/startup-checks';
import { compact } from '../../src/cli/compact';

/**
 * Upsert publications against real LanceDB tables on disk: one row per key, the newest
 * record's value; a replayed publication, an older epoch's late one, or a record of a key
 * that moved partition never bring back an older value or a deleted key; and the merge
 * keeps updating rows with the key's BTREE in place and after a compaction (LanceDB bugs
 * lancedb#3515 / #3177 reported updates of 0 rows there).
 */
const TOPIC = 'docs';
const TOPIC_ID = 'AAAAAAAAAAAAAAAAAAAAAA';
const T0 = Date.UTC(2026, 11, 6, 12);
const enc = (s: string) => new TextEncoder().encode(s);

type Change = readonly [
  offset: number,
  key: string | null,
  value: Record<string, unknown> | null,
  at?: number,
];

function definition(extra: Partial<ConsumerDefinitionInput> = {}): ConsumerDefinitionInput {
  return {
    name: 'docs',
    brokers: ['127.0.0.1:1'],
    topics: [TOPIC],
    schema: { fields: { id: 'string', title: 'string', n: 'int64' } },
    mode: 'upsert',
    key: 'record-key',
    keyFormat: 'string',
    ...extra,
  };
}

function decoderFor(def: ConsumerDefinitionInput): RecordDecoder {
  return new RecordDecoder(resolveConsumer(def, 'test'), () => T0);
}

function batchOf(decoder: RecordDecoder, partition: number, changes: readonly Change[]): RecordBatch {
  const messages: RawMessage[] = changes.map(([offset, key, value, at]) => ({
    offsetNumber: offset,
    timestampNumber: at ?? T0 + offset,
    key: key === null ? null : enc(key),
    value: value === null ? null : enc(JSON.stringify(value)),
  }));
  const decoded = decoder.decode(TOPIC, partition, messages, TOPIC_ID);
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

/** The table as a reader sees it (`_deleted = false`), key → title; and every row, deletes included. */
async function read(target: LanceTarget): Promise<{ live: Map<string, unknown>; rows: number }> {
  const db = await lancedb.connect(target.uri);
  try {
    const table = await db.openTable(target.table);
    const rows = (await table.query().where('_deleted = false').toArray()) as {
      _key: string;
      title: unknown;
    }[];
    const live = new Map<string, unknown>();
    for (const r of rows) {
      if (live.has(r._key)) throw new Error(`key ${r._key} held twice`);
      live.set(r._key, r.title);
    }
    return { live, rows: await table.countRows() };
  } finally {
    db.close();
  }
}

let dir: string;
let target: LanceTarget;
beforeEach(async () => {
  dir = await tempDir('kl-upsert');
  target = { uri: path.join(dir, 'lance'), table: 'docs' };
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

const connect = () => LanceTable.connect(target, silentLogger(), { upsertKey: ['_key'] });

test('a key written many times and deleted within and across publications holds its newest value once; a deleted key is read as absent', async () => {
  const decoder = decoderFor(definition());
  const lance = await connect();
  const first = await publish(lance, [
    batchOf(decoder, 0, [
      [0, 'a', { title: 'a0' }],
      [1, 'b', { title: 'b0' }],
      [2, 'a', { title: 'a1' }],
      [3, 'c', { title: 'c0' }],
      [4, 'c', null],
    ]),
  ]);
  // Reduced first: a once (a1), b, and c's delete as a row.
  expect(first.merge).toMatchObject({ inserted: 3, updated: 0, upserts: 2, deletes: 1 });
  const second = await publish(lance, [
    batchOf(decoder, 0, [
      [5, 'b', null],
      [6, 'c', { title: 'c1' }],
      [7, 'a', { title: 'a2' }],
    ]),
  ]);
  expect(second.merge).toMatchObject({ inserted: 0, updated: 3, upserts: 2, deletes: 1 });
  const { live, rows } = await read(target);
  expect(live).toEqual(
    new Map([
      ['a', 'a2'],
      ['c', 'c1'],
    ]),
  );
  expect(rows).toBe(3); // b's delete is a row, filtered by readers
  lance.close();
}, 60_000);

test('a replayed publication and an older epoch’s late publication change nothing: no older value, no deleted key comes back', async () => {
  const decoder = decoderFor(definition());
  const lance = await connect();
  const old = [
    batchOf(decoder, 0, [
      [0, 'a', { title: 'a0' }],
      [1, 'b', { title: 'b0' }],
    ]),
  ];
  const late = [batchOf(decoder, 0, [[2, 'a', { title: 'a-late-but-older' }]])];
  await publish(lance, old);
  await publish(lance, [
    batchOf(decoder, 0, [
      [3, 'a', { title: 'a3' }],
      [4, 'b', null],
      [5, 'd', null],
    ]),
  ]);
  // The first publication again (a crash after its merge), and a zombie's publication of
  // offset 2, which the table's newer rows have passed.
  const replay = await publish(lance, old);
  const zombie = await publish(lance, late);
  expect(replay.merge).toMatchObject({ inserted: 0, updated: 0 });
  expect(zombie.merge).toMatchObject({ inserted: 0, updated: 0 });
  // A key deleted before it was ever seen (d) stays deleted when its older value arrives.
  await publish(lance, [batchOf(decoder, 0, [[1, 'd', { title: 'd-older' }]])]);
  const { live } = await read(target);
  expect(live).toEqual(new Map([['a', 'a3']]));
  lance.close();
}, 60_000);

test('a key that moves partition (the partition count changed) is ordered by its records’ timestamps: the new partition’s later record wins, and a replay of the old partition does not', async () => {
  const decoder = decoderFor(definition());
  const lance = await connect();
  // Before the change: key k at partition 0, offset 500 (high); after: partition 3, offset 2 (low).
  await publish(lance, [batchOf(decoder, 0, [[500, 'k', { title: 'k-p0' }, T0 + 1_000]])]);
  await publish(lance, [batchOf(decoder, 3, [[2, 'k', { title: 'k-p3' }, T0 + 2_000]])]);
  await publish(lance, [batchOf(decoder, 0, [[500, 'k', { title: 'k-p0' }, T0 + 1_000]])]);
  expect((await read(target)).live).toEqual(new Map([['k', 'k-p3']]));
  // Both partitions in one publication reduce the same way.
  await publish(lance, [
    batchOf(decoder, 3, [[7, 'm', { title: 'm-p3' }, T0 + 5_000]]),
    batchOf(decoder, 0, [[900, 'm', { title: 'm-p0' }, T0 + 4_000]]),
  ]);
  expect((await read(target)).live.get('m')).toBe('m-p3');
  lance.close();
}, 60_000);

test('a row staged without a topic id (a broker without ids) is ordered by offset against its partition’s rows with an id, not by a later producer time', async () => {
  const at = { topic: TOPIC, partition: 0, row: 0 };
  // Offset 5 is newer than offset 4 whatever their timestamps, with one id unknown.
  expect(
    newer(
      { ...at, topicId: TOPIC_ID, offset: 5, timestamp: T0 },
      { ...at, topicId: '', offset: 4, timestamp: T0 + 9 },
    ),
  ).toBe(true);
  expect(
    newer(
      { ...at, topicId: '', offset: 4, timestamp: T0 + 9 },
      { ...at, topicId: TOPIC_ID, offset: 5, timestamp: T0 },
    ),
  ).toBe(false);
  // Two known ids that differ are two incarnations of the topic: ordered by time.
  expect(
    newer(
      { ...at, topicId: 'B', offset: 1, timestamp: T0 + 9 },
      { ...at, topicId: TOPIC_ID, offset: 5, timestamp: T0 },
    ),
  ).toBe(true);
  const decoder = decoderFor(definition());
  const message = (offset: number, title: string, timestamp: number): RawMessage => ({
    offsetNumber: offset,
    timestampNumber: timestamp,
    key: enc('k'),
    value: enc(JSON.stringify({ title })),
  });
  const lance = await connect();
  // Offset 4 staged without an id, with a producer time later than offset 5's.
  await publish(lance, [decoder.decode(TOPIC, 0, [message(4, 'older', T0 + 60_000)], '').batch!]);
  await publish(lance, [decoder.decode(TOPIC, 0, [message(5, 'newer', T0)], TOPIC_ID).batch!]);
  expect((await read(target)).live.get('k')).toBe('newer');
  // A replay of offset 4 (without an id) does not bring it back.
  await publish(lance, [decoder.decode(TOPIC, 0, [message(4, 'older', T0 + 60_000)], '').batch!]);
  expect((await read(target)).live.get('k')).toBe('newer');
  lance.close();
}, 60_000);

test('keys are compared by value and type: a composite (string, int64) key, 1 and "1" apart', async () => {
  expect(keyIdentity([1n])).not.toBe(keyIdentity(['1']));
  expect(keyIdentity(['a', 1n])).not.toBe(keyIdentity(['a1']));
  const def = definition({
    key: { fields: ['id', 'n'] },
    keyFormat: 'binary',
    schema: { fields: { id: 'string', n: 'int64', title: 'string' } },
  });
  const decoder = decoderFor(def);
  const lance = await LanceTable.connect(target, silentLogger(), { upsertKey: ['id', 'n'] });
  await publish(lance, [
    batchOf(decoder, 0, [
      [0, null, { id: 'x', n: 1, title: 'x1-a' }],
      [1, null, { id: 'x', n: 2, title: 'x2-a' }],
      [2, null, { id: 'x', n: 1, title: 'x1-b' }],
      [3, null, { id: 'x1', n: 1, title: 'other' }],
    ]),
  ]);
  await publish(lance, [batchOf(decoder, 0, [[4, null, { id: 'x', n: 2, title: 'x2-b' }]])]);
  const db = await lancedb.connect(target.uri);
  const rows = (await (await db.openTable('docs')).query().where('_deleted = false').toArray()) as {
    id: string;
    n: bigint;
    title: string;
  }[];
  db.close();
  expect(rows.map((r) => [r.id, Number(r.n), r.title]).sort()).toEqual([
    ['x', 1, 'x1-b'],
    ['x', 2, 'x2-b'],
    ['x1', 1, 'other'],
  ]);
  lance.close();
}, 60_000);

test('nanosecond timestamp keys one nanosecond apart stay three keys: reduced and merged by the stored integer, not a millisecond float', async () => {
  const def = definition({
    key: { fields: ['at'] },
    keyFormat: 'binary',
    schema: { fields: { at: { type: 'timestamp', unit: 'ns' }, title: 'string' } },
  });
  const base = 1_796_569_200_000_000_000n;
  const messages: RawMessage[] = [0, 1, 2].map((i) => ({
    offsetNumber: i,
    timestampNumber: T0 + i,
    key: null,
    // Integers beyond 2^53 are read exactly (exact-json.ts): written as JSON text, not numbers.
    value: enc(`{"at":${base + BigInt(i)},"title":"t${i}"}`),
  }));
  const decoded = decoderFor(def).decode(TOPIC, 0, messages, TOPIC_ID);
  expect(decoded.deadLetters).toEqual([]);
  const reduced = reduceToNewest([decoded.batch!], ['at']);
  expect(reduced.upserts).toBe(3);
  const lance = await LanceTable.connect(target, silentLogger(), { upsertKey: ['at'] });
  const written = await publish(lance, [decoded.batch!]);
  expect(written.merge).toMatchObject({ inserted: 3, upserts: 3 });
  lance.close();
  const db = await lancedb.connect(target.uri);
  try {
    const rows = await (await db.openTable(target.table)).query().select(['title']).toArray();
    expect(rows.map((r) => (r as { title: string }).title).sort()).toEqual(['t0', 't1', 't2']);
  } finally {
    db.close();
  }
}, 60_000);

test('updates land before the key’s BTREE exists, with it in place (built by the first compaction), and after the index was brought up to date', async () => {
  const decoder = decoderFor(definition());
  const lance = await connect();
  const keys = Array.from({ length: 2_000 }, (_, i) => `k${i}`);
  let offset = 0;
  const round = async (title: string) => {
    const changes: Change[] = keys.map((k) => [offset++, k, { title }]);
    return publish(lance, [batchOf(decoder, 0, changes)]);
  };
  await round('v0');
  const db = await lancedb.connect(target.uri);
  expect((await round('v1')).merge).toMatchObject({ inserted: 0, updated: keys.length });
  await lance.optimize();
  const indices = await (await db.openTable('docs')).listIndices();
  expect(indices.map((i) => i.columns.join(','))).toContain('_key');
  expect((await round('v2')).merge).toMatchObject({ inserted: 0, updated: keys.length });
  await lance.optimize();
  const stats = await (await db.openTable('docs')).indexStats('_key_idx');
  expect(stats?.numUnindexedRows).toBe(0);
  expect((await round('v3')).merge).toMatchObject({ inserted: 0, updated: keys.length });
  db.close();
  const { live, rows } = await read(target);
  expect(rows).toBe(keys.length);
  expect(new Set(live.values())).toEqual(new Set(['v3']));
  lance.close();
}, 120_000);

test('an upsert into a table created in append mode is refused, naming both keys', async () => {
  const decoder = decoderFor(definition());
  const appendOnly = await LanceTable.connect(target, silentLogger());
  await appendOnly.ensureSchema(batchOf(decoder, 0, [[0, 'a', { title: 'a' }]]).schema);
  appendOnly.close();
  const lance = await connect();
  await expect(publish(lance, [batchOf(decoder, 0, [[0, 'a', { title: 'a' }]])])).rejects.toThrow(
    /primary key is \(_topic, _partition, _offset, _topic_id\), not the upsert key \(_key\)/,
  );
  lance.close();
}, 60_000);

test('a reader of any version between two publications sees one publication whole or not at all: never its upserts without its deletes', async () => {
  const decoder = decoderFor(definition());
  const lance = await connect();
  await publish(lance, [
    batchOf(decoder, 0, [
      [0, 'a', { title: 'a1' }],
      [1, 'b', { title: 'b1' }],
    ]),
  ]);
  await publish(lance, [
    batchOf(decoder, 0, [
      [2, 'a', { title: 'a2' }],
      [3, 'b', null],
      [4, 'c', { title: 'c1' }],
    ]),
  ]);
  lance.close();
  const whole = [
    JSON.stringify([]),
    JSON.stringify([
      ['a', 'a1'],
      ['b', 'b1'],
    ]),
    JSON.stringify([
      ['a', 'a2'],
      ['c', 'c1'],
    ]),
  ];
  const db = await lancedb.connect(target.uri);
  const table = await db.openTable('docs');
  const versions = await table.listVersions();
  const seen = new Set<string>();
  for (const { version } of versions) {
    await table.checkout(version);
    const rows = (await table.query().where('_deleted = false').toArray()) as {
      _key: string;
      title: string;
    }[];
    const state = JSON.stringify(rows.map((r) => [r._key, r.title]).sort());
    expect(whole).toContain(state);
    seen.add(state);
  }
  db.close();
  expect(seen.size).toBe(3);
}, 60_000);

test('two writers merging the same new key at once (two replicas, a key in two partitions) leave it once', async () => {
  const decoder = decoderFor(definition());
  const setup = await connect();
  // Seeded and compacted, so that the key's BTREE covers the table (the indexed join is the
  // path that let concurrent inserts of one key through, measured).
  await publish(setup, [
    batchOf(
      decoder,
      0,
      Array.from({ length: 1_000 }, (_, i): Change => [i, `seed-${i}`, { title: 'seed' }]),
    ),
  ]);
  await setup.optimize();
  setup.close();
  for (let round = 0; round < 3; round++) {
    const writers = await Promise.all([0, 1, 2, 3].map(() => connect()));
    const outcomes = await Promise.allSettled(
      writers.map((w, i) =>
        publish(w, [
          batchOf(decoder, i, [[2_000 + round, `new-${round}`, { title: `from ${i}` }, T0 + 10 * round + i]]),
        ]),
      ),
    );
    for (const w of writers) w.close();
    for (const o of outcomes) if (o.status === 'rejected') throw o.reason;
    // One row for the key, and the newest position's value (partition 3, the latest timestamp).
    const { live } = await read(target);
    expect(live.get(`new-${round}`)).toBe('from 3');
  }
}, 120_000);

describe('the start checks the mode against the table', () => {
  const consumerOn = (extra: Partial<ConsumerDefinitionInput>) =>
    resolveConsumer({ ...definition(extra), lance: { uri: target.uri }, table: target.table }, 'docs.json');

  test('an upsert definition on an append table, and an append definition on an upsert table, stop the start naming the key', async () => {
    const decoder = decoderFor(definition());
    const schema = batchOf(decoder, 0, [[0, 'a', { title: 'a' }]]).schema;
    const appendTable = await LanceTable.connect(target, silentLogger());
    await appendTable.ensureSchema(schema);
    appendTable.close();
    await expect(checkTableMode(consumerOn({}), silentLogger())).rejects.toThrow(
      /key: table docs is keyed on \(_topic, _partition, _offset, _topic_id\), not \(_key\): it was created in append mode/,
    );
    await fsp.rm(target.uri, { recursive: true, force: true });
    const upsertTable = await connect();
    await upsertTable.ensureSchema(schema);
    upsertTable.close();
    await expect(checkTableMode(consumerOn({}), silentLogger())).resolves.toBeUndefined();
    await expect(
      checkTableMode(
        consumerOn({ mode: 'append', key: undefined, keyFormat: 'binary', tombstones: 'ignore' }),
        silentLogger(),
      ),
    ).rejects.toThrow(/mode: table docs is an upsert table keyed on \(_key\)/);
  }, 60_000);
});

test('compact --purge-deletes-older-than measures a delete by when it landed, not its producer time: a delete of old records written just now stays', async () => {
  const decoder = decoderFor(definition());
  const lance = await connect();
  await publish(lance, [
    batchOf(decoder, 0, [
      [0, 'old', { title: 'o' }, T0],
      [1, 'old', null, T0 + 1_000],
      [2, 'redeleted', null, T0 + 1_500],
      [3, 'live', { title: 'l' }, T0 + 3_000],
    ]),
  ]);
  await new Promise((resolve) => setTimeout(resolve, 50));
  const cutoff = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 50));
  // A replica catching up on old records: their deletes land now, with producer times long past.
  await publish(lance, [
    batchOf(decoder, 0, [
      [4, 'late', { title: 'x' }, T0],
      [5, 'late', null, T0 + 1],
      [6, 'redeleted', null, T0 + 2_000],
    ]),
  ]);
  lance.close();
  const consumer = resolveConsumer(
    { ...definition(), lance: { uri: target.uri }, table: target.table },
    'docs.json',
  );
  const result = await compact(consumer, 0, cutoff);
  expect(result.purgedDeletes).toBe(1);
  const db = await lancedb.connect(target.uri);
  const rows = (await (await db.openTable('docs')).query().toArray()) as {
    _key: string;
    _deleted: boolean;
  }[];
  db.close();
  // `old`'s delete landed before the cutoff: purged. `late`'s and the second delete of
  // `redeleted` landed after it: they stay, whatever their records' timestamps say.
  expect(rows.map((r) => [r._key, r._deleted]).sort()).toEqual([
    ['late', true],
    ['live', false],
    ['redeleted', true],
  ]);
}, 60_000);

test('an upsert whose publication lacks a column of the table (another replica added it) leaves that column null, not the older value', async () => {
  const wide = decoderFor(
    definition({ schema: { fields: { title: 'string', extra: 'string', emb: { type: 'vector', dim: 2 } } } }),
  );
  const narrow = decoderFor(definition());
  const lance = await connect();
  await publish(lance, [batchOf(wide, 0, [[0, 'a', { title: 'a0', extra: 'old', emb: [1, 2] }]])]);
  await publish(lance, [batchOf(narrow, 0, [[1, 'a', { title: 'a1' }]])]);
  const db = await lancedb.connect(target.uri);
  const rows = (await (await db.openTable('docs')).query().toArray()) as {
    _key: string;
    title: string;
    extra: string | null;
    emb: unknown;
  }[];
  db.close();
  expect(rows.map((r) => [r._key, r.title, r.extra, r.emb])).toEqual([['a', 'a1', null, null]]);
  lance.close();
}, 60_000);

test('a merge retried after a commit conflict with a replica that added a column sets that column null, not the older record’s value', async () => {
  const wide = decoderFor(definition({ schema: { fields: { title: 'string', extra: 'string' } } }));
  const narrow = decoderFor(definition({ schema: { fields: { title: 'string' } } }));
  const lance = await connect();
  const other = await connect();
  await publish(lance, [batchOf(narrow, 0, [[0, 'a', { title: 'a0' }]])]);
  // The first attempt of the next merge loses to another replica's commit, which adds
  // `extra` with an older record's value of the key; the attempt after it must see `extra`.
  const execute = MergeInsertBuilder.prototype.execute;
  let interfered = false;
  const spy = jest.spyOn(MergeInsertBuilder.prototype, 'execute').mockImplementation(async function (
    this: MergeInsertBuilder,
    ...args
  ) {
    if (!interfered) {
      interfered = true;
      await publish(other, [batchOf(wide, 0, [[1, 'a', { title: 'a1', extra: 'old' }]])]);
      throw new Error('Retryable commit conflict for version 3: preempted by concurrent transaction');
    }
    return execute.apply(this, args);
  });
  try {
    await publish(lance, [batchOf(narrow, 0, [[2, 'a', { title: 'a2' }]])]);
  } finally {
    spy.mockRestore();
  }
  expect(interfered).toBe(true);
  const db = await lancedb.connect(target.uri);
  const rows = (await (await db.openTable('docs')).query().toArray()) as {
    _key: string;
    title: string;
    extra: string | null;
  }[];
  db.close();
  expect(rows.map((r) => [r._key, r.title, r.extra])).toEqual([['a', 'a2', null]]);
  lance.close();
  other.close();
}, 60_000);
