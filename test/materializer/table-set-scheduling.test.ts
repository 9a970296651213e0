import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { silentLogger, type Logger } from '../../src/common/logger';
import { TableRefusedError } from '../../src/lance/table-opening';
import { Materializer, sharedBudgets } from '../../src/materializer/materializer';
import type { Turn } from '../../src/materializer/materializer';
import { ledger, type Plan } from '../../src/materializer/ledger';
import { PartialPublicationError } from '../../src/materializer/publication-errors';
import { TableSet, type ServedTable, type TableSetOptions } from '../../src/materializer/table-set';
import type { SealedPart } from '../../src/staging/sealed-part';
import {
  capturingLogger,
  expectExactly,
  materializerOptions,
  ownershipOf,
  readLance,
  stageRows,
} from '../support/materializer-fixture';
import { tempDir } from '../support/rows';

jest.setTimeout(60_000);

let dir: string;
beforeEach(async () => {
  dir = await tempDir('kl-table-slots');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

/** A gate a test opens when it has seen what it waits for. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

interface FakeBehaviour {
  /** Called in each turn; returns after the fake publication (default: at once). */
  turn?: (table: string, turn: Turn | undefined) => Promise<void>;
  optimize?: (table: string) => Promise<void>;
}

/** A table whose publisher always has one more publication ready (its turn uses every attempt). */
function fakeTable(table: string, b: FakeBehaviour, runs: string[]): ServedTable {
  return {
    setOwnership() {},
    sealed() {},
    async runOnce(_now, _drain, turn) {
      runs.push(table);
      if (turn) turn.attempts = 0;
      await (b.turn?.(table, turn) ?? Promise.resolve());
      return [];
    },
    async optimizeIfLeader() {
      await (b.optimize?.(table) ?? Promise.resolve());
      return true;
    },
    left: { waitingParts: 0, unresolvableParts: 0, retryingPlans: 0 },
    partsOnDisk: () => Promise.resolve(0),
    stats: () => ({}) as never,
    close() {},
    maintainsTable: () => true,
    commitsBesidePublications: () => true,
  };
}

/** Table directories holding one (fake) sealed part each: the table set serves only directories with work. */
async function tablesWithWork(stagingRoot: string, tables: readonly string[]): Promise<void> {
  for (const t of tables) {
    await fsp.mkdir(path.join(stagingRoot, t), { recursive: true });
    await fsp.writeFile(path.join(stagingRoot, t, '0.arrows'), '');
  }
}

function fakeSet(
  stagingRoot: string,
  b: FakeBehaviour,
  runs: string[],
  o: Partial<TableSetOptions> = {},
): TableSet {
  const set = new TableSet({
    stagingRoot,
    logger: silentLogger(),
    optimizeEveryMs: 0,
    attemptsPerTurn: 1,
    turnsInFlight: 4,
    open: (t) => Promise.resolve(fakeTable(t, b, runs)),
    ...o,
  });
  set.setOwnership(new Map());
  return set;
}

const count = (runs: readonly string[], table: string) => runs.filter((r) => r === table).length;

describe('table slots: no table holds the others', () => {
  test("one table's long compaction holds no other table's turns (and that table gets none while it compacts)", async () => {
    const stagingRoot = path.join(dir, 'staging');
    const others = ['t1', 't2', 't3', 't4', 't5'];
    await tablesWithWork(stagingRoot, ['big', ...others]);
    const compaction = gate();
    let compacting = false;
    const runs: string[] = [];
    const set = fakeSet(
      stagingRoot,
      {
        optimize: async (t) => {
          if (t !== 'big') return;
          compacting = true;
          await compaction.wait;
          compacting = false;
        },
      },
      runs,
      // Only big is due for compaction at start (its first time spread to 0, the others' to the period's end).
      { optimizeEveryMs: 3_600_000, random: () => 0, turnsInFlight: 2 },
    );
    await set.discover();
    await set.round(); // every table opened; big's compaction starts in its own slot
    expect(compacting).toBe(true);
    const bigBefore = count(runs, 'big');
    for (let i = 0; i < 5; i++) await set.round();
    for (const t of others) expect(count(runs, t)).toBeGreaterThanOrEqual(6);
    expect(count(runs, 'big')).toBe(bigBefore); // kept out of turns while it compacts
    compaction.open();
    await set.stop();
    set.close();
  });

  test('a slow turn of one table holds only its own slot: the other tables keep being served', async () => {
    const stagingRoot = path.join(dir, 'staging');
    await tablesWithWork(stagingRoot, ['slow', 'a', 'b', 'c']);
    const slowTurn = gate();
    const served = gate();
    const runs: string[] = [];
    // Counted from the start of slow's turn: on a loaded machine its first turn may begin
    // after the others' first few (opening a table reads its directory).
    let base: Map<string, number> | undefined;
    const set = fakeSet(
      stagingRoot,
      {
        turn: async (t) => {
          if (t === 'slow') {
            base = new Map(['a', 'b', 'c'].map((x) => [x, count(runs, x)]));
            await slowTurn.wait;
          } else await new Promise((r) => setImmediate(r));
          if (base && ['a', 'b', 'c'].every((x) => count(runs, x) - base!.get(x)! >= 10)) served.open();
        },
      },
      runs,
      { turnsInFlight: 2 },
    );
    await set.discover();
    set.poll();
    await served.wait; // each other table had ten turns while slow's first one still runs
    expect(count(runs, 'slow')).toBe(1);
    slowTurn.open();
    await set.stop();
    set.close();
  });

  test('a table is served again only after every other waiting table had a turn since its last one', async () => {
    const stagingRoot = path.join(dir, 'staging');
    const tables = ['a', 'b', 'c', 'd', 'e'];
    await tablesWithWork(stagingRoot, tables);
    const enough = gate();
    const runs: string[] = [];
    const set = fakeSet(
      stagingRoot,
      {
        turn: async () => {
          await new Promise((r) => setImmediate(r));
          if (runs.length >= 40) enough.open();
        },
      },
      runs,
      { turnsInFlight: 2 },
    );
    await set.discover();
    await set.round(); // every table opened (openings end in any order)
    runs.length = 0;
    set.poll();
    await enough.wait;
    await set.stop();
    // Any window of five consecutive turns names the five tables (a table with more never jumps the queue).
    for (let i = 0; i + tables.length <= 40; i++)
      expect(new Set(runs.slice(i, i + tables.length)).size).toBe(tables.length);
    set.close();
  });

  test('no turn starts after stop: a poll after it serves nothing', async () => {
    const stagingRoot = path.join(dir, 'staging');
    await tablesWithWork(stagingRoot, ['a', 'b']);
    const runs: string[] = [];
    const set = fakeSet(stagingRoot, {}, runs);
    await set.discover();
    await set.round();
    const before = runs.length;
    await set.stop();
    set.poll();
    await set.round();
    expect(runs.length).toBe(before);
    set.close();
  });
});

describe('a damaged table stalls alone', () => {
  const partial = new PartialPublicationError('01PLAN', 'bad', 3, 10);

  test('a publication found half in one table stalls that table (damaged, one line naming it and the publication, never retried); the others go on', async () => {
    const stagingRoot = path.join(dir, 'staging');
    await tablesWithWork(stagingRoot, ['bad', 'good']);
    const { logger, lines } = capturingLogger();
    const runs: string[] = [];
    const set = fakeSet(
      stagingRoot,
      {
        turn: (t) => (t === 'bad' ? Promise.reject(partial) : Promise.resolve()),
      },
      runs,
      { logger },
    );
    await set.discover();
    await set.round();
    await set.round(Date.now() + 3_600_000); // long past any backoff: still not retried
    await set.round(Date.now() + 7_200_000);
    expect(count(runs, 'bad')).toBe(1);
    expect(count(runs, 'good')).toBe(3);
    expect(set.reports().find((r) => r.table === 'bad')?.stalled).toBe('damaged');
    expect(set.reports().find((r) => r.table === 'good')?.stalled).toBeUndefined();
    const stalled = lines.filter((l) => l.event === 'table.stalled');
    expect(stalled).toHaveLength(1);
    expect(stalled[0]).toMatchObject({ table: 'bad', reason: 'damaged', publication: '01PLAN', level: 50 });
    // A drain leaves it alone too.
    await set.stop();
    await set.drain(Date.now() + 100); // good always has more: the deadline ends this drain
    expect(count(runs, 'bad')).toBe(1);
    set.close();
  });

  test('with one fixed table, damage stays the worker’s fatal', async () => {
    const stagingRoot = path.join(dir, 'staging');
    await tablesWithWork(stagingRoot, ['only']);
    const set = fakeSet(
      stagingRoot,
      {
        turn: () => Promise.reject(partial),
      },
      [],
      { damageIsFatal: true },
    );
    await set.discover();
    await expect(set.round()).rejects.toBe(partial);
    set.close();
  });
});

describe('tables with nothing waiting', () => {
  test('an empty staging directory (a table the definition dropped) is neither opened nor reported stalled', async () => {
    const stagingRoot = path.join(dir, 'staging');
    await fsp.mkdir(path.join(stagingRoot, 'old'), { recursive: true });
    await tablesWithWork(stagingRoot, ['live']);
    const opened: string[] = [];
    const set = new TableSet({
      stagingRoot,
      logger: silentLogger(),
      optimizeEveryMs: 0,
      attemptsPerTurn: 1,
      open: (t) => {
        opened.push(t);
        if (t === 'old')
          return Promise.reject(new TableRefusedError('old', [{ field: 'mode', message: 'append table' }]));
        return Promise.resolve(fakeTable(t, {}, []));
      },
    });
    set.setOwnership(new Map());
    await set.discover();
    await set.round();
    expect(set.tables).toEqual(['live']);
    expect(opened).toEqual(['live']);
    expect(set.reports().filter((r) => r.stalled)).toEqual([]);
    set.close();
  });

  test("a definition's one table is served with nothing staged (an index build a crash interrupted is finished), and never closed as idle", async () => {
    const stagingRoot = path.join(dir, 'staging');
    await fsp.mkdir(stagingRoot, { recursive: true });
    const opened: string[] = [];
    const upkeep: string[] = [];
    const set = new TableSet({
      stagingRoot,
      logger: silentLogger(),
      optimizeEveryMs: 0,
      attemptsPerTurn: 1,
      alwaysServed: 'events',
      idleCloseMs: 0,
      open: (t) => {
        opened.push(t);
        return Promise.resolve(fakeTable(t, {}, []));
      },
      upkeep: (t) => ({ tick: () => upkeep.push(t), abort() {}, stop: () => Promise.resolve() }),
    });
    set.setOwnership(new Map());
    await set.discover();
    await set.round();
    await set.round();
    expect(set.tables).toEqual(['events']);
    expect(opened).toEqual(['events']);
    expect(upkeep.length).toBeGreaterThanOrEqual(2);
    set.close();
  });

  test('a refused table reports its waiting parts, and is no longer stalled once nothing waits', async () => {
    const stagingRoot = path.join(dir, 'staging');
    await tablesWithWork(stagingRoot, ['refused', 'live']);
    const set = new TableSet({
      stagingRoot,
      logger: silentLogger(),
      optimizeEveryMs: 0,
      attemptsPerTurn: 1,
      open: (t) =>
        t === 'refused'
          ? Promise.reject(new TableRefusedError(t, [{ field: 'mode', message: 'append table' }]))
          : Promise.resolve(fakeTable(t, {}, [])),
    });
    set.setOwnership(new Map());
    await set.discover();
    await set.round();
    expect(set.reports().find((r) => r.table === 'refused')).toMatchObject({
      stalled: 'refused',
      partsWaiting: 1,
    });
    // The operator follows the refusal's advice: its parts are moved away.
    await fsp.rm(path.join(stagingRoot, 'refused', '0.arrows'));
    await set.round(Date.now() + 60_000);
    const report = set.reports().find((r) => r.table === 'refused');
    expect(report?.stalled).toBeUndefined();
    expect(report?.partsWaiting).toBe(0);
    set.close();
  });
});

describe('tables with nothing to do', () => {
  /** A table whose every turn finds nothing to publish (its catalog empty, nothing waiting). */
  const idleTable = (table: string, runs: string[]): ServedTable => ({
    ...fakeTable(table, {}, runs),
    async runOnce() {
      runs.push(table);
      return Promise.resolve([]);
    },
  });

  test('a table whose turn found nothing is not listed again at every poll, and a part sealed into it gets it a turn at the next', async () => {
    const stagingRoot = path.join(dir, 'staging');
    await tablesWithWork(stagingRoot, ['quiet', 'other']);
    const runs: string[] = [];
    const set = new TableSet({
      stagingRoot,
      logger: silentLogger(),
      optimizeEveryMs: 0,
      attemptsPerTurn: 1,
      turnsInFlight: 4,
      open: (t) => Promise.resolve(idleTable(t, runs)),
    });
    set.setOwnership(new Map());
    await set.discover();
    await set.round();
    expect([...runs].sort()).toEqual(['other', 'quiet']);
    for (let i = 0; i < 3; i++) await set.round();
    expect(runs).toHaveLength(2); // 200 tables polled every 250 ms each listed their directory and ledger
    const part = { path: path.join(stagingRoot, 'quiet', '1.arrows') } as unknown as SealedPart;
    set.sealed([part]);
    await set.round();
    expect(runs.slice(2)).toEqual(['quiet']);
    set.close();
  });
});

describe('drain at stop', () => {
  const chainA = [{ owner: 'A', epoch: 1, start: 0 }];

  function realSet(stagingRoot: string, lanceDir: string, logger: Logger): TableSet {
    const budgets = sharedBudgets({ fetchPermits: 2, decodePermits: 2, sourceReservationBytes: 1 << 28 });
    const set = new TableSet({
      stagingRoot,
      logger,
      optimizeEveryMs: 0,
      attemptsPerTurn: 1,
      turnsInFlight: 4,
      open: async (table, tableDir): Promise<ServedTable> =>
        Materializer.open(
          materializerOptions(tableDir, lanceDir, {
            lance: { uri: lanceDir, table },
            shared: budgets,
            logger,
          }),
        ),
    });
    set.setOwnership(ownershipOf(1, chainA, 1_000_000));
    return set;
  }

  test('a turn used by a finished ledger entry (no publication) does not end the drain: the ready parts are published', async () => {
    const stagingRoot = path.join(dir, 'staging');
    const lanceDir = path.join(dir, 'lance');
    // Each table: ready parts, and first in its ledger a publication whose cleanup was cut short
    // after `published` (an fsync error after the commit): finishing it uses the table's turn.
    for (const [table, rows] of [
      ['a', 10],
      ['b', 5],
    ] as const) {
      const td = path.join(stagingRoot, table);
      await stageRows(td, { partitions: 1, perPartition: rows, rowsPerPart: rows });
      const finished = {
        id: '00000000000000000000000001',
        table,
        schemaKey: 'x',
        createdAt: 0,
        parts: [
          {
            path: path.join(td, 'gone.arrows'),
            bytes: 0,
            checksum: 'x',
            epoch: { owner: 'A', epoch: 1 },
            rows: 0,
            keptRows: 0,
            ranges: [],
            keep: [],
          },
        ],
        rows: 0,
        bytes: 0,
      } as unknown as Plan;
      await ledger.writePlan(td, finished);
      await ledger.markPublished(td, finished.id, 1);
    }
    const set = realSet(stagingRoot, lanceDir, silentLogger());
    await set.discover();
    const outcome = await set.drain(Date.now() + 60_000);
    expectExactly(await readLance(lanceDir, 'a'), 1, () => 10);
    expectExactly(await readLance(lanceDir, 'b'), 1, () => 5);
    expect(outcome.left.map((l) => [l.table, l.parts]).sort()).toEqual([
      ['a', 0],
      ['b', 0],
    ]);
    set.close();
  });

  test('a drain runs four tables at once, and tries tables backing off after a failure last', async () => {
    const stagingRoot = path.join(dir, 'staging');
    const tables = ['f', 'a', 'b', 'c', 'd', 'e'];
    await tablesWithWork(stagingRoot, tables);
    let running = 0;
    let most = 0;
    const order: string[] = [];
    let failF = true;
    const set = new TableSet({
      stagingRoot,
      logger: silentLogger(),
      optimizeEveryMs: 0,
      attemptsPerTurn: 1,
      turnsInFlight: 1,
      open: async (t) => {
        await Promise.resolve();
        if (t === 'f' && failF) throw new Error('connect ECONNREFUSED store');
        return {
          ...fakeTable(t, {}, []),
          async runOnce() {
            order.push(t);
            running += 1;
            most = Math.max(most, running);
            for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
            running -= 1;
            return [];
          },
        };
      },
    });
    set.setOwnership(new Map());
    await set.discover();
    await set.round(); // f fails: it backs off
    expect(set.reports().find((r) => r.table === 'f')?.stalled).toBe('failing');
    failF = false;
    order.length = 0;
    await set.stop();
    await set.drain(Date.now() + 60_000);
    expect(most).toBe(4);
    expect(order.at(-1)).toBe('f');
    set.close();
  });
});

describe('publication buffers', () => {
  test('idle tables keep no publication buffers of their own: the worker keeps as many as its reservation admits publications at once', async () => {
    const stagingRoot = path.join(dir, 'staging');
    const lanceDir = path.join(dir, 'lance');
    const maxPublicationBytes = 4 << 20;
    // Room for two usual publications at once (each holds 2× its bytes).
    const budgets = sharedBudgets({
      fetchPermits: 2,
      decodePermits: 2,
      sourceReservationBytes: 4 * maxPublicationBytes,
      maxPublicationBytes,
    });
    const tables = ['t0', 't1', 't2', 't3', 't4', 't5', 't6', 't7'];
    for (const t of tables)
      await stageRows(path.join(stagingRoot, t), { partitions: 1, perPartition: 2000, rowsPerPart: 2000 });
    const set = new TableSet({
      stagingRoot,
      logger: silentLogger(),
      optimizeEveryMs: 0,
      attemptsPerTurn: 1,
      turnsInFlight: 4,
      open: async (table, tableDir): Promise<ServedTable> =>
        Materializer.open(
          materializerOptions(tableDir, lanceDir, {
            lance: { uri: lanceDir, table },
            shared: budgets,
            maxPublicationBytes,
            mode: 'streamed',
          }),
        ),
    });
    set.setOwnership(ownershipOf(1, [{ owner: 'A', epoch: 1, start: 0 }], 1_000_000));
    await set.discover();
    while (await set.round());
    for (const t of tables) expect(await readLance(lanceDir, t)).toHaveLength(2000);
    // Eight tables published; what stays allocated is the worker's two buffers at most, not two per table.
    expect(budgets.buffers.keptBytes).toBeGreaterThan(0);
    expect(budgets.buffers.keptBytes).toBeLessThanOrEqual(2 * (maxPublicationBytes + 4 * 1024 * 1024));
    set.close();
  });
});

describe('open tables', () => {
  test('idle tables are closed (after idleCloseMs, or beyond maxOpen the least recently served) and reopened by their next turn', async () => {
    const stagingRoot = path.join(dir, 'staging');
    const tables = ['a', 'b', 'c', 'd'];
    await tablesWithWork(stagingRoot, tables);
    const opens: string[] = [];
    const closes: string[] = [];
    const set = new TableSet({
      stagingRoot,
      logger: silentLogger(),
      optimizeEveryMs: 0,
      attemptsPerTurn: 1,
      turnsInFlight: 1,
      maxOpen: 2,
      idleCloseMs: 300_000,
      open: (t) => {
        opens.push(t);
        return Promise.resolve({ ...fakeTable(t, {}, []), close: () => void closes.push(t) });
      },
    });
    set.setOwnership(new Map());
    await set.discover();
    await set.round();
    await set.round();
    // Never more than two open once a turn ended: the least recently served idle ones were closed.
    expect(opens.length - closes.length).toBeLessThanOrEqual(2);
    expect(closes.length).toBeGreaterThan(0);
    const opened = opens.length;
    await set.round(Date.now() + 600_000); // long idle: every open table is closed, then reopened by its turn
    expect(opens.length).toBeGreaterThan(opened);
    expect(opens.length - closes.length).toBeLessThanOrEqual(2);
    await set.stop();
    set.close();
  });
});
