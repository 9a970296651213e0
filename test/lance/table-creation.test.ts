import * as lancedb from '@lancedb/lancedb';
import {
  Field,
  FixedSizeList,
  Float32,
  Float64,
  Int16,
  Int32,
  Int64,
  Schema,
  Table as ArrowTable,
} from 'apache-arrow';
import { spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { LanceTable } from '../../src/lance/lance-table';
import { readyForRestore } from '../../src/lance/restore-duty';
import { createTable, restoreOverwrittenRows } from '../../src/lance/table-creation';
import { silentLogger } from '../../src/common/logger';
import {
  createsOverwrite,
  firstTimes,
  listsNothing,
  missesOpens,
  patchConnections,
} from '../support/lance-store-races';
import { capturingLogger } from '../support/materializer-fixture';
import { TEST_SCHEMA, payloadOf, range, rowsFor, tempDir } from '../support/rows';

/**
 * The hazard: a replica's create of a table that another replica created a moment
 * before and already published into. Lance commits such a late create as an Overwrite
 * at the next version (its commit looks for the table again and finds it), and every
 * row before it is gone, though each of those publications was final. The creator
 * must find that its create landed over rows and put them back, each once. The race
 * itself is a matter of milliseconds (or of a listing that came back short), so these
 * tests land the overwrite where they want it with LanceDB's own overwrite, which is
 * the commit Lance makes in the race.
 */
const TOPIC = 'events';
const TABLE = 'events';

let dir: string;
let uri: string;
beforeEach(async () => {
  dir = await tempDir('kl-table-creation');
  uri = path.join(dir, 'lance');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

const connectOwn = async () => {
  const db = await lancedb.connect(uri);
  return { db, release: () => db.close() };
};
/** What LanceTable readies the table with: the overwritten version's columns, then the row key. */
const keyOf = (t: lancedb.Table, source: Schema) => readyForRestore(t, TABLE, source, silentLogger());

/** A create (LanceDB's, or `create`) and, when it landed over rows, their restore: what ensureTableSchema does. */
async function createAndRestore(
  schema: Schema,
  logger = silentLogger(),
  create?: (db: lancedb.Connection) => Promise<lancedb.Table>,
): Promise<{ version: number; overwrittenRows: number | undefined; restoredRows: number }> {
  const live = await lancedb.connect(uri, { readConsistencyInterval: 0 });
  try {
    const creation = await createTable(connectOwn, TABLE, schema, logger, create);
    const restoredRows =
      creation.overwrittenRows !== 0
        ? await restoreOverwrittenRows(connectOwn, live, TABLE, creation.version, keyOf, logger)
        : 0;
    return { ...creation, restoredRows };
  } finally {
    live.close();
  }
}

const overwrite = (schema: Schema) => (db: lancedb.Connection) =>
  db.createEmptyTable(TABLE, schema, { mode: 'overwrite' });

/** Intervals covering every offset `firstReplica(2)` publishes, on both its partitions. */
const FIRST_REPLICA_ROWS = [0, 1].map((partition) => ({ topic: TOPIC, partition, first: 0, last: 1_199 }));

/** The table holds `rows` row keys, each once. */
async function expectEachRowOnce(rows: number): Promise<void> {
  const { keys } = await rowsNow();
  expect(keys.size).toBe(rows);
  expect([...keys.values()].every((n) => n === 1)).toBe(true);
}

/** The table as the first replica makes it (through LanceTable), with `adds` publications of 600 rows. */
async function firstReplica(adds: number, extraColumn = false): Promise<Schema> {
  const writer = await LanceTable.connect({ uri, table: TABLE }, silentLogger());
  await writer.ensureSchema(TEST_SCHEMA);
  writer.close();
  const db = await lancedb.connect(uri);
  const table = await db.openTable(TABLE);
  const created = await table.schema();
  if (extraColumn) await table.addColumns([new Field('shard', new Int32(), true)]);
  for (let a = 0; a < adds; a++) {
    const batch = rowsFor(TOPIC, a % 2, range(a * 600, (a + 1) * 600));
    await table.add(new ArrowTable([batch]));
  }
  if (extraColumn) await table.update({ where: '_offset < 300', values: { shard: 7 } });
  table.close();
  db.close();
  return created;
}

async function rowsNow(): Promise<{
  keys: Map<string, number>;
  bad: number;
  shard7: number;
  columns: string[];
}> {
  const db = await lancedb.connect(uri);
  const table = await db.openTable(TABLE);
  const columns = (await table.schema()).fields.map((f) => f.name);
  const rows = (await table.query().toArray()) as {
    _partition: number;
    _offset: bigint;
    message: string;
    shard?: number | bigint | null;
  }[];
  table.close();
  db.close();
  const keys = new Map<string, number>();
  let bad = 0;
  let shard7 = 0;
  for (const r of rows) {
    const key = `${r._partition}:${Number(r._offset)}`;
    keys.set(key, (keys.get(key) ?? 0) + 1);
    if (r.message !== payloadOf(TOPIC, r._partition, Number(r._offset))) bad++;
    if (r.shard !== null && r.shard !== undefined && Number(r.shard) === 7) shard7++;
  }
  return { keys, bad, shard7, columns };
}

test('a create that Lance commits over a table holding another replica’s publications puts every row back, each once', async () => {
  const schema = await firstReplica(3);
  const { logger, lines } = capturingLogger();
  const creation = await createAndRestore(schema, logger, overwrite(schema));
  // Versions: create, three adds, then the overwrite (system indexes wait for a compaction).
  expect(creation).toEqual({ version: 5, overwrittenRows: 1_800, restoredRows: 1_800 });
  const { keys, bad } = await rowsNow();
  expect(keys.size).toBe(1_800);
  expect([...keys.values()].every((n) => n === 1)).toBe(true);
  expect(bad).toBe(0);
  expect(lines.map((l) => l.event)).toEqual(['lance.table.createdOver', 'lance.table.restored']);
});

test('a create whose check of what it landed over fails (the store failed a read) is restored all the same, and the restore checks first', async () => {
  const schema = await firstReplica(2);
  const { logger, lines } = capturingLogger();
  // The overwrite commits; the store then fails the creator's first read of the table.
  const failingCheck = (db: lancedb.Connection) =>
    overwrite(schema)(db).then((table) => {
      const checkout = table.checkout.bind(table);
      let failures = 1;
      table.checkout = (version: number | string) =>
        failures-- > 0 ? Promise.reject(new Error('HTTP 503 Slow Down (injected)')) : checkout(version);
      return table;
    });
  const creation = await createAndRestore(schema, logger, failingCheck);
  // Versions: create, two adds, then the overwrite.
  expect(creation).toEqual({ version: 4, overwrittenRows: undefined, restoredRows: 1_200 });
  const { keys, bad } = await rowsNow();
  expect(keys.size).toBe(1_200);
  expect([...keys.values()].every((n) => n === 1)).toBe(true);
  expect(bad).toBe(0);
  expect(lines.map((l) => l.event)).toEqual(['lance.table.createCheckFailed', 'lance.table.restored']);
  // A restore of a version that is not an overwrite (it holds rows) inserts nothing.
  const live = await lancedb.connect(uri, { readConsistencyInterval: 0 });
  expect(await restoreOverwrittenRows(connectOwn, live, TABLE, 5, keyOf, silentLogger())).toBe(0);
  live.close();
});

test('rows put back keep a column another replica added after the create', async () => {
  const schema = await firstReplica(2, true);
  const creation = await createAndRestore(schema, silentLogger(), overwrite(schema));
  expect(creation.restoredRows).toBe(1_200);
  const { keys, shard7, columns } = await rowsNow();
  expect(keys.size).toBe(1_200);
  expect(columns).toContain('shard');
  // _offset < 300 of both publications (partitions 0 and 1 each hold offsets from 0 or 600).
  expect(shard7).toBe(300);
});

test('a create that finds the table there (existOk) opens it and commits nothing', async () => {
  const schema = await firstReplica(2);
  const live = await lancedb.connect(uri, { readConsistencyInterval: 0 });
  const before = await (await live.openTable(TABLE)).version();
  const creation = await createAndRestore(schema);
  const after = await (await live.openTable(TABLE)).version();
  live.close();
  expect(creation).toEqual({ version: before, overwrittenRows: 0, restoredRows: 0 });
  expect(after).toBe(before);
  expect((await rowsNow()).keys.size).toBe(1_200);
});

test('two creators before any publication: the second create lands over an empty table and puts nothing back', async () => {
  const schema = await firstReplica(0);
  const creation = await createAndRestore(schema, silentLogger(), overwrite(schema));
  expect(creation.overwrittenRows).toBe(0);
  expect(creation.version).toBeGreaterThan(1);
  expect((await rowsNow()).keys.size).toBe(0);
});

test('a restore run twice (the first cut short, then tried again) inserts each row once', async () => {
  const schema = await firstReplica(2);
  const creation = await createAndRestore(schema, silentLogger(), overwrite(schema));
  const live = await lancedb.connect(uri, { readConsistencyInterval: 0 });
  const again = await restoreOverwrittenRows(
    connectOwn,
    live,
    TABLE,
    creation.version,
    keyOf,
    silentLogger(),
  );
  live.close();
  expect(again).toBe(0);
  await expectEachRowOnce(1_200);
});

test('a listing that comes back without the table is confirmed by opening it: the table is used, not created again', async () => {
  const schema = await firstReplica(1);
  const { logger, lines } = capturingLogger();
  const writer = await LanceTable.connect({ uri, table: TABLE }, logger);
  // A short LIST, as s3proxy's filesystem backend gives under concurrent writes.
  listsNothing((writer as unknown as { db: lancedb.Connection }).db);
  await writer.ensureSchema(schema);
  writer.close();
  expect(lines.map((l) => l.event)).not.toContain('lance.table.created');
  expect((await rowsNow()).keys.size).toBe(600);
});

test('rows put back into a creator schema with a vector column they lack and a wider integer column get null vectors and their integers', async () => {
  const created = await firstReplica(1, true); // 600 rows; shard (Int32) is 7 on the first 300
  const creatorSchema = new Schema([
    ...created.fields,
    new Field('shard', new Int64(), true),
    new Field('embedding', new FixedSizeList(4, new Field('item', new Float32(), true)), true),
  ]);
  const creation = await createAndRestore(creatorSchema, silentLogger(), overwrite(creatorSchema));
  expect(creation.restoredRows).toBe(600);
  const { keys, bad, shard7 } = await rowsNow();
  expect(keys.size).toBe(600);
  expect(bad).toBe(0);
  expect(shard7).toBe(300);
  const db = await lancedb.connect(uri);
  const table = await db.openTable(TABLE);
  const embeddings = (await table.query().select(['embedding']).toArray()) as { embedding: unknown }[];
  table.close();
  db.close();
  expect(embeddings.every((r) => r.embedding === null)).toBe(true);
});

test('rows put back into a creator schema that widened a float and a small integer column keep their values, in the wider types', async () => {
  const created = await firstReplica(1);
  const db = await lancedb.connect(uri);
  const table = await db.openTable(TABLE);
  await table.addColumns([new Field('ratio', new Float32(), true), new Field('small', new Int16(), true)]);
  await table.update({ where: '_offset < 300', values: { ratio: 0.5, small: -3 } });
  table.close();
  db.close();
  const creatorSchema = new Schema([
    ...created.fields,
    new Field('ratio', new Float64(), true),
    new Field('small', new Int64(), true),
  ]);
  const creation = await createAndRestore(creatorSchema, silentLogger(), overwrite(creatorSchema));
  expect(creation.restoredRows).toBe(600);
  const read = await lancedb.connect(uri);
  const restored = await read.openTable(TABLE);
  const types = Object.fromEntries((await restored.schema()).fields.map((f) => [f.name, String(f.type)]));
  const rows = (await restored.query().select(['_offset', 'ratio', 'small']).toArray()) as {
    _offset: bigint;
    ratio: number | null;
    small: bigint | null;
  }[];
  restored.close();
  read.close();
  expect(types).toMatchObject({ ratio: 'Float64', small: 'Int64' });
  expect(rows).toHaveLength(600);
  for (const r of rows) {
    const set = Number(r._offset) < 300;
    expect([r.ratio, r.small === null ? null : Number(r.small)]).toEqual(set ? [0.5, -3] : [null, null]);
  }
});

test('a restore cut short by the store is finished before the next count (which would miss those rows and have them added again), and the system indexes come back with it', async () => {
  const schema = await firstReplica(2); // 1,200 rows
  const writer = await LanceTable.connect({ uri, table: TABLE }, silentLogger());
  const db = (writer as unknown as { db: lancedb.Connection }).db;
  // A short LIST, and an open that misses the table as well: the writer creates it...
  listsNothing(db);
  const failures = firstTimes(1);
  const open = db.openTable.bind(db);
  db.openTable = (name, ...rest) =>
    failures() ? Promise.reject(new Error('HTTP 503 Slow Down (injected)')) : open(name, ...rest);
  missesOpens(db, firstTimes(1)); // asked first: the first open misses, the second fails
  // ...and Lance commits that create over the table, as it does in a race.
  const unpatch = patchConnections((own) => createsOverwrite(own));
  try {
    // The restore's first read of the live table fails: the create stands without the rows.
    await expect(writer.ensureSchema(schema)).rejects.toThrow(/503/);
    expect(await writer.countRows(FIRST_REPLICA_ROWS)).toBe(1_200);
  } finally {
    unpatch();
    writer.close();
  }
  await expectEachRowOnce(1_200);
  const check = await lancedb.connect(uri);
  const table = await check.openTable(TABLE);
  const indexed = (await table.listIndices()).map((i) => i.columns.join(','));
  table.close();
  check.close();
  expect(indexed).toEqual(expect.arrayContaining(['_offset', '_partition']));
});

describe('a creator SIGKILLed between its create over the table and the restore', () => {
  const CHILD = path.resolve(__dirname, '../../dist/test/support/create-over-child.js');

  function runCreator(
    intent: string,
    crashAt: string,
  ): Promise<{ code: number | null; signal: string | null }> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [CHILD, uri, TABLE, intent], {
        env: { ...process.env, KAFKA_LANCE_TEST_CRASH_AT: crashAt },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      child.on('error', reject);
      child.on('exit', (code, signal) => resolve({ code, signal }));
    });
  }

  test.each([
    [
      'after-create',
      'before it knew its create’s version (found among the versions since its intent)',
      false,
    ],
    ['after-create', 'and the next process’s listings come back without the table', true],
    ['before-restore', 'with the overwritten version written down', false],
  ])(
    'at %s, %s: the next process puts every row back before its first count, each once, and forgets the duty',
    async (crashAt, _how, short) => {
      await firstReplica(2); // 1,200 rows
      const intent = path.join(dir, 'staging', 'lance-restore.json');
      expect(await runCreator(intent, crashAt)).toEqual({ code: null, signal: 'SIGKILL' });
      // The create stands over the rows, and the process that owed them back is gone.
      expect((await rowsNow()).keys.size).toBe(0);
      expect(JSON.parse(await fsp.readFile(intent, 'utf8'))).toMatchObject({ uri, table: TABLE });

      const { logger, lines } = capturingLogger();
      const restoreListings = short ? patchConnections(listsNothing) : () => undefined;
      const next = await LanceTable.connect({ uri, table: TABLE }, logger, { restoreIntent: intent });
      try {
        expect(await next.countRows(FIRST_REPLICA_ROWS)).toBe(1_200);
      } finally {
        restoreListings();
        next.close();
      }
      const { keys, bad } = await rowsNow();
      expect(keys.size).toBe(1_200);
      expect([...keys.values()].every((n) => n === 1)).toBe(true);
      expect(bad).toBe(0);
      expect(lines.map((l) => l.event)).toContain('lance.table.restored');
      await expect(fsp.access(intent)).rejects.toThrow(/ENOENT/);
    },
  );

  test('a duty inherited while the table is not to be seen survives a create that lands over nothing but the earlier overwrite, and those rows come back', async () => {
    await firstReplica(2); // 1,200 rows
    const intent = path.join(dir, 'staging', 'lance-restore.json');
    expect(await runCreator(intent, 'after-create')).toEqual({ code: null, signal: 'SIGKILL' });
    // The next process: its first two opens miss the table (short listings), so it creates
    // the table, and Lance commits that create over the empty version the killed one left.
    const hiddenOpens = firstTimes(2);
    const unpatch = patchConnections((db) => {
      listsNothing(db);
      missesOpens(db, hiddenOpens);
      createsOverwrite(db);
    });
    const next = await LanceTable.connect({ uri, table: TABLE }, silentLogger(), { restoreIntent: intent });
    try {
      await next.ensureSchema(TEST_SCHEMA);
      expect(await next.countRows(FIRST_REPLICA_ROWS)).toBe(1_200);
    } finally {
      unpatch();
      next.close();
    }
    await expectEachRowOnce(1_200);
    await expect(fsp.access(intent)).rejects.toThrow(/ENOENT/);
  });

  test('a duty whose table is not to be seen is kept (the listing may be short), and is dropped once the table is seen with no overwrite in it', async () => {
    const intent = path.join(dir, 'staging', 'lance-restore.json');
    await fsp.mkdir(path.dirname(intent), { recursive: true });
    await fsp.writeFile(intent, JSON.stringify({ uri, table: TABLE, version: null, writtenAt: Date.now() }));
    const reader = await LanceTable.connect({ uri, table: TABLE }, silentLogger(), { restoreIntent: intent });
    expect(await reader.countRows([{ topic: TOPIC, partition: 0, first: 0, last: 9 }])).toBe(0);
    await fsp.access(intent);
    // A first create (nothing to land over), and the next count looks among its versions.
    await reader.ensureSchema(TEST_SCHEMA);
    expect(await reader.countRows([{ topic: TOPIC, partition: 0, first: 0, last: 9 }])).toBe(0);
    reader.close();
    await expect(fsp.access(intent)).rejects.toThrow(/ENOENT/);
  });

  test('a create that commits over the table and then fails (the store lost its answer) is looked for again at the next count: no row stays out', async () => {
    await firstReplica(2); // 1,200 rows
    const intent = path.join(dir, 'staging', 'lance-restore.json');
    const writer = await LanceTable.connect({ uri, table: TABLE }, silentLogger(), { restoreIntent: intent });
    const db = (writer as unknown as { db: lancedb.Connection }).db;
    listsNothing(db);
    missesOpens(db, firstTimes(1));
    const unpatch = patchConnections((own) =>
      createsOverwrite(own, () => {
        throw new Error('HTTP 503 Slow Down (injected, after the create committed)');
      }),
    );
    try {
      await expect(writer.ensureSchema(TEST_SCHEMA)).rejects.toThrow(/503/);
      expect((await rowsNow()).keys.size).toBe(0);
      expect(await writer.countRows(FIRST_REPLICA_ROWS)).toBe(1_200);
    } finally {
      unpatch();
      writer.close();
    }
    const { keys } = await rowsNow();
    expect([...keys.values()].every((n) => n === 1)).toBe(true);
    await expect(fsp.access(intent)).rejects.toThrow(/ENOENT/);
  });
});
