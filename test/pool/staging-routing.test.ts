import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { Field, Float64, Schema } from 'apache-arrow';
import type { RawMessage } from '../../src/decode/raw-message';
import { partFiles, readSealedRows, tempDir } from '../support/rows';
import type { StagingTables } from '../../src/pool/staging-tables';
import { openRoutingLane } from '../support/routing-lane';

/**
 * A routing consumer's staging lane, on the main thread: each record's table is decided
 * before decoding, each table stages its own parts under <dataDir>/staging/<table>/, and
 * the lane's durable offsets are merged over the tables.
 */

const ROUTE_BY_KIND = `import { defineConsumer } from 'kafka-lance';
export default defineConsumer({
  name: 'routed',
  topics: ['t'],
  schema: { fields: { message: 'string', kind: 'string' } },
  materializer: { enabled: false },
  route: (r) => {
    const kind = JSON.parse(r.value!.toString()).kind;
    if (kind === 'boom') throw new Error('no table for boom');
    return kind === 'default' ? undefined : kind;
  },
});`;

const message = (offset: number, kind: string): RawMessage => ({
  offsetNumber: offset,
  timestampNumber: Date.now(),
  key: null,
  value: Buffer.from(JSON.stringify({ message: `m${offset}`, kind })),
});

const staged = (dir: string, table: string) => readSealedRows(path.join(dir, 'staging', table));

describe('staging a routing consumer', () => {
  test('a route splits one partition into three tables, each record once in its own table', async () => {
    const { dir, close, batch, durable } = await openRoutingLane(ROUTE_BY_KIND);
    const kinds = ['a', 'b', 'c', 'a', 'c', 'c', 'b', 'a', 'a'];
    const result = await batch(
      0,
      kinds.map((k, i) => message(i, k)),
    );
    expect(result).toMatchObject({ dropped: false, staged: 9, deadLetters: [] });
    expect(await durable()).toEqual([['t', 0, 8]]);
    await close();
    for (const table of ['a', 'b', 'c']) {
      const rows = await staged(dir, table);
      expect(rows.map((r) => r.offset)).toEqual(kinds.flatMap((k, i) => (k === table ? [i] : [])));
    }
  });

  test('a record whose route throws or names an invalid table is a dead letter (invalid-table); the others are staged', async () => {
    const { dir, close, batch, durable } = await openRoutingLane(ROUTE_BY_KIND);
    const result = await batch(0, [
      message(0, 'a'),
      message(1, '../../x'),
      message(2, 'boom'),
      message(3, 'a'),
    ]);
    expect(result.staged).toBe(2);
    expect(result.deadLetters.map((l) => [l.offset, l.reason])).toEqual([
      [1, 'invalid-table'],
      [2, 'invalid-table'],
    ]);
    expect(result.deadLetters[0]!.detail).toMatch(/"\.\.\/\.\.\/x"/);
    expect(result.deadLetters[1]!.detail).toMatch(/threw: no table for boom/);
    expect(await durable()).toEqual([['t', 0, 3]]);
    await close();
    expect((await staged(dir, 'a')).map((r) => r.offset)).toEqual([0, 3]);
    expect((await fsp.readdir(path.join(dir, 'staging'))).sort()).toEqual(['a']);
  });

  test("a route's undefined sends the record to the definition's table", async () => {
    const { dir, close, batch } = await openRoutingLane(ROUTE_BY_KIND);
    await batch(0, [message(0, 'default'), message(1, 'b')]);
    await close();
    expect((await staged(dir, 'routed')).map((r) => r.offset)).toEqual([0]);
    expect((await staged(dir, 'b')).map((r) => r.offset)).toEqual([1]);
  });

  test('a table that gets no more records of a partition does not hold its durable offset back', async () => {
    const { batch, durable } = await openRoutingLane(ROUTE_BY_KIND);
    await batch(0, [message(0, 'a'), message(1, 'b')]);
    expect(await durable()).toEqual([['t', 0, 1]]);
    await batch(0, [message(2, 'a'), message(3, 'a')]);
    await batch(0, [message(4, 'a')], 6); // offsets 5 and 6 hold nothing deliverable
    expect(await durable()).toEqual([['t', 0, 6]]);
  });

  test('a batch of only dead letters before any table saw the partition is still durable', async () => {
    const { batch, durable } = await openRoutingLane(ROUTE_BY_KIND);
    await batch(1, [message(0, 'boom'), message(1, '')]);
    expect(await durable()).toEqual([['t', 1, 1]]);
  });

  test('a new epoch reaches every table: redeliveries below a claim are skipped in each', async () => {
    const { ask, batch, batchReply, durable } = await openRoutingLane(ROUTE_BY_KIND);
    await batch(0, [message(0, 'a'), message(1, 'b')]);
    await ask(
      { type: 'epoch', epoch: { owner: 'o', epoch: 1 }, revoked: [], assigned: [['t', 0, 1]] },
      'epoch',
    );
    const old = await batch(0, [message(2, 'a')]);
    expect(old.dropped).toBe(true); // admitted in epoch 0
    const redelivered = await batchReply({
      type: 'batch',
      topic: 't',
      partition: 0,
      records: [message(0, 'a'), message(1, 'b'), message(2, 'a')],
      through: 2,
      epoch: 1,
      schemas: [],
    });
    expect(redelivered).toMatchObject({ staged: 1, skipped: 2 });
    expect(await durable()).toEqual([['t', 0, 2]]);
  });

  test('a non-deterministic route never stages a record redelivered in the same epoch in a second table', async () => {
    // The first two calls name 'a', every later one 'b': routed again, a redelivery would land in 'b'.
    const flipping = `export default {
  name: 'routed', topics: ['t'], schema: { fields: { message: 'string' } }, materializer: { enabled: false },
  route: (() => { let n = 0; return () => (n++ < 2 ? 'a' : 'b'); })(),
};`;
    const { dir, batch, durable, close } = await openRoutingLane(flipping);
    await batch(0, [message(0, 'x'), message(1, 'x')]);
    const redelivered = await batch(0, [message(0, 'x'), message(1, 'x'), message(2, 'x')]);
    expect(redelivered).toMatchObject({ staged: 1, skipped: 2 });
    expect(await durable()).toEqual([['t', 0, 2]]);
    await close();
    expect((await staged(dir, 'a')).map((r) => r.offset)).toEqual([0, 1]);
    // 'b' was first seen after offset 1 was handled: it starts there, and holds only offset 2.
    expect((await staged(dir, 'b')).map((r) => r.offset)).toEqual([2]);
  });

  test('a table first seen after a claim starts from what the lane handled, not from the claim', async () => {
    const { ask, durable } = await openRoutingLane(ROUTE_BY_KIND);
    await ask(
      { type: 'epoch', epoch: { owner: 'o', epoch: 1 }, revoked: [], assigned: [['t', 0, -1]] },
      'epoch',
    );
    const first = (records: RawMessage[]) =>
      ask(
        {
          type: 'batch',
          topic: 't',
          partition: 0,
          records,
          through: records.at(-1)!.offsetNumber,
          epoch: 1,
          schemas: [],
        },
        'batch',
      );
    await first([message(0, 'a'), message(1, 'a')]);
    // Redelivered with another kind: were the table 'c' to start at the claim, it would take 0 and 1.
    const again = await first([message(0, 'c'), message(1, 'c'), message(2, 'c')]);
    expect(again.type === 'batch' && again.result).toMatchObject({ staged: 1, skipped: 2 });
    expect(await durable()).toEqual([['t', 0, 2]]);
  });

  test('a table keeps offsets only of the partitions it follows, however many the lane claims', async () => {
    // 200 tables each holding all 600 claimed partitions' offsets were a third of the main thread's heap.
    const { service, ask, durable } = await openRoutingLane(ROUTE_BY_KIND);
    const claims = Array.from({ length: 600 }, (_, p): [string, number, number] => ['t', p, -1]);
    await ask({ type: 'epoch', epoch: { owner: 'o', epoch: 1 }, revoked: [], assigned: claims }, 'epoch');
    const batch = (partition: number, kind: string) =>
      ask(
        {
          type: 'batch',
          topic: 't',
          partition,
          records: [message(0, kind)],
          through: 0,
          epoch: 1,
          schemas: [],
        },
        'batch',
      );
    await batch(0, 'a');
    await batch(1, 'b');
    await batch(2, 'a');
    expect(await durable()).toEqual([
      ['t', 0, 0],
      ['t', 1, 0],
      ['t', 2, 0],
    ]);
    const tables = (service as unknown as { routed: { tables: StagingTables } }).routed.tables;
    const followed = (table: string) => [...tables.get(table)!.staging.durableOffsets().keys()].length;
    expect([followed('a'), followed('b')]).toEqual([2, 1]);
    // A later claim reaches the tables that follow the partition: a redelivery below it is skipped there.
    await ask(
      {
        type: 'epoch',
        epoch: { owner: 'o', epoch: 2 },
        revoked: [],
        assigned: [
          ['t', 0, 0],
          ['t', 1, -1],
        ],
      },
      'epoch',
    );
    const again = await ask(
      {
        type: 'batch',
        topic: 't',
        partition: 0,
        records: [message(0, 'a'), message(1, 'a')],
        through: 1,
        epoch: 2,
        schemas: [],
      },
      'batch',
    );
    expect(again.type === 'batch' && again.result).toMatchObject({ staged: 1, skipped: 1 });
  });

  test("a full disk when a new table's directory is made pauses the batch (disk full, retried), never fails the lane", async () => {
    const { dir, ask, batch, close } = await openRoutingLane(ROUTE_BY_KIND);
    await batch(0, [message(0, 'a')]);
    const mkdir = fsp.mkdir.bind(fsp);
    const refuse = jest.spyOn(fsp, 'mkdir').mockImplementation((where, options) => {
      if (String(where).endsWith(path.join('staging', 'b')))
        return Promise.reject(Object.assign(new Error('no space left on device'), { code: 'ENOSPC' }));
      return mkdir(where, options);
    });
    const records = [message(1, 'b'), message(2, 'a')];
    const request = {
      type: 'batch',
      topic: 't',
      partition: 0,
      records,
      through: 2,
      epoch: 0,
      schemas: [],
    } as const;
    try {
      const refused = await ask(request, 'error');
      expect(refused).toMatchObject({ fatal: false, diskFull: { operation: 'mkdir' } });
    } finally {
      refuse.mockRestore();
    }
    // Space is back: the same batch again (as the main thread retries it) is staged whole.
    expect(await batch(0, records)).toMatchObject({ staged: 2 });
    await close();
    expect((await staged(dir, 'b')).map((r) => r.offset)).toEqual([1]);
    expect((await staged(dir, 'a')).map((r) => r.offset)).toEqual([0, 2]);
  });

  test('a route that writes into the bytes it is given cannot change the record staged (it gets a copy)', async () => {
    const scribbling = `export default {
  name: 'routed', topics: ['t'], schema: { fields: { message: 'string', kind: 'string' } }, materializer: { enabled: false },
  route: (r: { value: Buffer | null }) => { r.value!.fill(0x20); return 'a'; },
};`;
    const { dir, batch, close } = await openRoutingLane(scribbling);
    const result = await batch(0, [message(0, 'a'), message(1, 'a')]);
    expect(result).toMatchObject({ staged: 2, deadLetters: [] });
    await close();
    expect((await staged(dir, 'a')).map((r) => r.message)).toEqual(['m0', 'm1']);
  });

  test('records naming a new table beyond staging.maxTables are dead letters (invalid-table), not a directory each', async () => {
    const bounded = ROUTE_BY_KIND.replace("topics: ['t'],", "topics: ['t'], staging: { maxTables: 2 },");
    const { dir, batch, durable, close } = await openRoutingLane(bounded);
    const result = await batch(0, [message(0, 'a'), message(1, 'b'), message(2, 'c'), message(3, 'a')]);
    expect(result.staged).toBe(3);
    expect(result.deadLetters.map((l) => [l.offset, l.reason])).toEqual([[2, 'invalid-table']]);
    expect(result.deadLetters[0]!.detail).toMatch(/too many tables: "c".*staging\.maxTables \(2\)/);
    expect(await durable()).toEqual([['t', 0, 3]]);
    await close();
    expect((await fsp.readdir(path.join(dir, 'staging'))).sort()).toEqual(['a', 'b']);
  });

  test('many tables under an open-part bound of one still stage and seal every part', async () => {
    const { dir, close, batch } = await openRoutingLane(ROUTE_BY_KIND, 1);
    const tables = ['a', 'b', 'c', 'd', 'e'];
    await batch(
      0,
      tables.map((k, i) => message(i, k)),
    );
    await batch(
      0,
      tables.map((k, i) => message(i + 5, k)),
    );
    const closed = await close();
    expect(closed.rows).toBe(10);
    for (const [i, table] of tables.entries()) {
      expect((await staged(dir, table)).map((r) => r.offset).sort((x, y) => x - y)).toEqual([i, i + 5]);
      expect(await partFiles(path.join(dir, 'staging', table), 'open')).toEqual([]);
    }
  });

  test('a {topic} template stages each topic in its own table', async () => {
    const { dir, ask, close } = await openRoutingLane(
      ROUTE_BY_KIND.replace(/route: \(r\) => \{[\s\S]*?\n {2}\},\n/, '').replace(
        "topics: ['t'],",
        "topics: ['t'], table: 'cdc_{topic}',",
      ),
    );
    await ask(
      {
        type: 'batch',
        topic: 'orders.eu',
        partition: 0,
        records: [message(0, 'x')],
        through: 0,
        epoch: 0,
        schemas: [],
      },
      'batch',
    );
    await close();
    expect((await staged(dir, 'cdc_orders.eu')).map((r) => [r.topic, r.offset])).toEqual([['orders.eu', 0]]);
  });

  test("a table first seen is seeded with its Lance table's columns: a value of another type is a dead letter there only", async () => {
    const dir = await tempDir('kl-routing-seeds');
    const db = await lancedb.connect(path.join(dir, 'lance'));
    await db.createEmptyTable('typed', new Schema([new Field('v', new Float64(), true)]));
    db.close();
    const inferred = `export default {
  name: 'routed', topics: ['t'], schema: 'infer', materializer: { enabled: false },
  route: (r: { value: Buffer | null }) => JSON.parse(r.value!.toString()).table,
};`;
    const { batch, close } = await openRoutingLane(inferred, 8, dir);
    const value = (table: string, v: unknown) => Buffer.from(JSON.stringify({ table, v }));
    const result = await batch(0, [
      { offsetNumber: 0, timestampNumber: Date.now(), key: null, value: value('typed', 'text') },
      { offsetNumber: 1, timestampNumber: Date.now(), key: null, value: value('fresh', 'text') },
    ]);
    expect(result.deadLetters.map((l) => [l.offset, l.reason, l.field])).toEqual([
      [0, 'schema-mismatch', 'v'],
    ]);
    expect(result.staged).toBe(1);
    await close();
  });
});
