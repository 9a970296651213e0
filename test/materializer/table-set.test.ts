import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import type { Logger } from '../../src/common/logger';
import { silentLogger } from '../../src/common/logger';
import { checkTableOpening, type TableExpectations } from '../../src/lance/table-opening';
import { Materializer, sharedBudgets, type SharedBudgets } from '../../src/materializer/materializer';
import { TableSet, type ServedTable } from '../../src/materializer/table-set';
import { readSealedPart } from '../../src/staging/sealed-part';
import {
  capturingLogger,
  expectExactly,
  ledgerFiles,
  materializerOptions,
  ownershipOf,
  readLance,
  stageRows,
} from '../support/materializer-fixture';
import { tempDir } from '../support/rows';

const chainA = [{ owner: 'A', epoch: 1, start: 0 }];
const inferred: TableExpectations = { fields: undefined, epochUnit: 'ms', upsertKey: undefined };

let dir: string;
let stagingRoot: string;
let lanceDir: string;
beforeEach(async () => {
  dir = await tempDir('kl-tables');
  stagingRoot = path.join(dir, 'staging');
  lanceDir = path.join(dir, 'lance');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

interface SetOptions {
  budgets?: SharedBudgets;
  logger?: Logger;
  expectations?: TableExpectations;
  mode?: 'buffered' | 'streamed';
  /** Runs before each table's opening (a test's store failure). */
  beforeOpen?: (table: string) => void;
  attemptsPerTurn?: number;
  turnsInFlight?: number;
}

/** A table set as the worker builds it: real Materializers on a local Lance database, sharing one set of budgets. */
function tableSet(o: SetOptions = {}): { set: TableSet; opened: Materializer[] } {
  const budgets =
    o.budgets ?? sharedBudgets({ fetchPermits: 2, decodePermits: 2, sourceReservationBytes: 1 << 28 });
  const logger = o.logger ?? silentLogger();
  const opened: Materializer[] = [];
  const set = new TableSet({
    stagingRoot,
    logger,
    optimizeEveryMs: 0,
    attemptsPerTurn: o.attemptsPerTurn ?? 1,
    turnsInFlight: o.turnsInFlight ?? 1,
    open: async (table, tableDir): Promise<ServedTable> => {
      o.beforeOpen?.(table);
      const lance = { uri: lanceDir, table };
      await checkTableOpening(lance, o.expectations ?? inferred);
      const m = await Materializer.open(
        materializerOptions(tableDir, lanceDir, {
          lance,
          logger,
          shared: budgets,
          mode: o.mode ?? 'buffered',
          // One part per publication: a backlog is many publications.
          maxPublicationBytes: 1,
        }),
      );
      opened.push(m);
      return m;
    },
  });
  set.setOwnership(ownershipOf(2, chainA, 1_000_000));
  return { set, opened };
}

async function roundsUntilIdle(set: TableSet, limit = 500): Promise<number> {
  for (let rounds = 1; rounds <= limit; rounds++) if (!(await set.round())) return rounds;
  throw new Error(`still busy after ${limit} rounds`);
}

const tableDir = (table: string) => path.join(stagingRoot, table);

describe('table set: many tables, one worker', () => {
  test.each([1, 4])(
    'a quiet table with one record is published in the first round while three tables have backlogs (%i turns at once)',
    async (turnsInFlight) => {
      for (const busy of ['busy_a', 'busy_b', 'busy_c'])
        await stageRows(tableDir(busy), { partitions: 2, perPartition: 500, rowsPerPart: 100 }); // 5 parts of 200 rows each
      await stageRows(tableDir('quiet'), { partitions: 1, perPartition: 1, rowsPerPart: 1 });
      const { set, opened } = tableSet({ turnsInFlight });
      await set.discover();
      expect(set.tables.sort()).toEqual(['busy_a', 'busy_b', 'busy_c', 'quiet']);

      const more = await set.round();
      expect(more).toBe(true); // the busy tables used their turn: more is ready
      expectExactly(await readLance(lanceDir, 'quiet'), 1, () => 1);
      // Each busy table made one publication (one part) in that round, not its whole backlog.
      for (const busy of ['busy_a', 'busy_b', 'busy_c']) {
        expect((await readLance(lanceDir, busy)).length).toBe(200);
        // ...and planned no more than it published: no backlog of plan writes held the round.
        expect(await ledgerFiles(tableDir(busy))).toEqual([]);
      }

      await roundsUntilIdle(set);
      for (const busy of ['busy_a', 'busy_b', 'busy_c'])
        expectExactly(await readLance(lanceDir, busy), 2, () => 500);
      expectExactly(await readLance(lanceDir, 'quiet'), 1, () => 1);
      for (const m of opened) m.close();
    },
  );

  test('a table whose store fails backs off alone: the others publish, it says so once and resumes by itself', async () => {
    for (const t of ['healthy', 'broken'])
      await stageRows(tableDir(t), { partitions: 2, perPartition: 100, rowsPerPart: 100 });
    const { logger, lines } = capturingLogger();
    let opens = 0;
    let storeDown = true;
    const { set, opened } = tableSet({
      logger,
      beforeOpen: (table) => {
        if (table !== 'broken') return;
        opens += 1;
        if (storeDown) throw new Error('connect ECONNREFUSED store');
      },
    });
    await set.discover();
    const start = Date.now();
    await set.round(start);
    await set.round(start + 100); // still inside its backoff: not tried again
    expect(opens).toBe(1);
    expectExactly(await readLance(lanceDir, 'healthy'), 2, () => 100);
    expect(await readLance(lanceDir, 'broken')).toEqual([]);
    expect(set.reports().find((r) => r.table === 'broken')?.stalled).toBe('failing');
    expect(set.reports().find((r) => r.table === 'healthy')?.stalled).toBeUndefined();
    const stalled = lines.filter((l) => l.event === 'table.stalled');
    expect(stalled).toHaveLength(1);
    expect(stalled[0]).toMatchObject({ table: 'broken', reason: 'failing' });
    expect(String(stalled[0]!.err)).toContain('ECONNREFUSED');

    storeDown = false;
    await set.round(start + 60_000); // past its backoff
    await roundsUntilIdle(set);
    expectExactly(await readLance(lanceDir, 'broken'), 2, () => 100);
    expect(set.reports().find((r) => r.table === 'broken')?.stalled).toBeUndefined();
    expect(lines.filter((l) => l.event === 'table.resumed').map((l) => l.table)).toEqual(['broken']);
    expect(lines.filter((l) => l.event === 'table.stalled')).toHaveLength(1);
    for (const m of opened) m.close();
  });

  test('a table whose Lance table refuses a declared type stalls alone, one line naming the table and the field', async () => {
    // "poisoned" exists with message as a string; the definition now declares it int64.
    await stageRows(tableDir('poisoned'), { partitions: 1, perPartition: 10, rowsPerPart: 10 });
    const first = tableSet();
    await first.set.discover();
    await roundsUntilIdle(first.set);
    for (const m of first.opened) m.close();
    expect(await readLance(lanceDir, 'poisoned')).toHaveLength(10);

    await stageRows(tableDir('poisoned'), { partitions: 1, perPartition: 10, rowsPerPart: 10, from: 10 });
    await stageRows(tableDir('fine'), { partitions: 2, perPartition: 50, rowsPerPart: 50 });
    const { logger, lines } = capturingLogger();
    const { set, opened } = tableSet({
      logger,
      expectations: {
        fields: [{ name: 'message', type: 'int64', nullable: true }],
        epochUnit: 'ms',
        upsertKey: undefined,
      },
    });
    await set.discover();
    await roundsUntilIdle(set);
    expectExactly(await readLance(lanceDir, 'fine'), 2, () => 50);
    expect(await readLance(lanceDir, 'poisoned')).toHaveLength(10); // its new parts wait
    expect((await fsp.readdir(tableDir('poisoned'))).filter((n) => n.endsWith('.arrows'))).toHaveLength(1);
    expect(set.reports().find((r) => r.table === 'poisoned')?.stalled).toBe('refused');
    const stalled = lines.filter((l) => l.event === 'table.stalled');
    expect(stalled).toHaveLength(1);
    expect(stalled[0]).toMatchObject({
      table: 'poisoned',
      reason: 'refused',
      fields: ['schema.fields.message'],
    });
    expect(String(stalled[0]!.err)).toContain('column "message" of Lance table poisoned is Utf8');
    for (const m of opened) m.close();
  });

  test.each(['buffered', 'streamed'] as const)(
    'one set of permits bounds the whole worker (%s): no more fetches or decodes at once than its capacity, with three tables taking their turns at once',
    async (mode) => {
      for (const t of ['t1', 't2', 't3'])
        await stageRows(tableDir(t), { partitions: 2, perPartition: 300, rowsPerPart: 100 });
      const budgets = sharedBudgets({ fetchPermits: 1, decodePermits: 1, sourceReservationBytes: 1 << 28 });
      const most = { fetch: 0, decode: 0 };
      const runs = { fetch: 0, decode: 0 };
      for (const permits of [budgets.fetch, budgets.decode]) {
        const run = permits.run.bind(permits);
        let running = 0;
        permits.run = <T>(task: () => Promise<T>) =>
          run(async () => {
            running += 1;
            runs[permits.kind] += 1;
            most[permits.kind] = Math.max(most[permits.kind], running);
            try {
              return await task();
            } finally {
              running -= 1;
            }
          });
      }
      const { set, opened } = tableSet({ budgets, mode, attemptsPerTurn: 2, turnsInFlight: 3 });
      await set.discover();
      await roundsUntilIdle(set);
      for (const t of ['t1', 't2', 't3']) expectExactly(await readLance(lanceDir, t), 2, () => 300);
      expect(runs.fetch).toBeGreaterThanOrEqual(9); // every part (3 a table) of every table went through them
      expect(most).toEqual({ fetch: 1, decode: 1 });
      // Every table reports the worker's one set (the host reads any of them).
      for (const m of opened) expect(m.stats().permits.map((p) => p.capacity)).toEqual([1, 1]);
      for (const m of opened) m.close();
    },
  );

  test('a table first named by a sealed part joins the set, and a drain publishes every table', async () => {
    await stageRows(tableDir('early'), { partitions: 1, perPartition: 50, rowsPerPart: 50 });
    const { set, opened } = tableSet();
    await set.discover();
    expect(set.tables).toEqual(['early']);
    await stageRows(tableDir('late'), { partitions: 2, perPartition: 50, rowsPerPart: 25 });
    const names = (await fsp.readdir(tableDir('late'))).filter((n) => n.endsWith('.arrows'));
    // What a sealed notification names: the part's path, under its table's directory.
    const parts = await Promise.all(names.map((n) => readSealedPart(path.join(tableDir('late'), n))));
    set.sealed(parts.map((p) => p.part));
    expect(set.tables.sort()).toEqual(['early', 'late']);
    const outcome = await set.drain(Date.now() + 60_000);
    expect(outcome.rows).toBe(150);
    expect(outcome.left.map((l) => [l.table, l.parts]).sort()).toEqual([
      ['early', 0],
      ['late', 0],
    ]);
    expectExactly(await readLance(lanceDir, 'late'), 2, () => 50);
    for (const m of opened) m.close();
    const db = await lancedb.connect(lanceDir);
    expect((await db.tableNames()).sort()).toEqual(['early', 'late']);
    db.close();
  });
});
