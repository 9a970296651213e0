import * as lancedb from '@lancedb/lancedb';
import { Table as ArrowTable } from 'apache-arrow';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { silentLogger } from '../../src/common/logger';
import { LanceTable, type LanceTarget } from '../../src/lance/lance-table';
import { range, rowsFor, tempDir } from '../support/rows';

/**
 * Lance checks a commit only against the manifests written after its read version
 * that still exist: a version removed by cleanup is skipped. So an insert-if-absent
 * merge that read the table before a cleanup (a replica frozen inside its merge, a
 * whole-table join on a large table) and commits after it would not see a concurrent
 * merge of the same keys whose version the cleanup removed: its rows would go in
 * twice. The long merge is a LanceDB handle opened without read consistency: it stays
 * on the version it read (its manifest and indexes loaded, as a merge in flight holds
 * them), and its merge-insert commits with that read version, as the late commit of a
 * merge that read the table then does.
 */
const TOPIC = 'events';
const KEY = ['_topic', '_partition', '_offset'];
const ROWS = 100;

const publication = (from: number) =>
  (async function* () {
    yield await Promise.resolve(rowsFor(TOPIC, 0, range(from, from + ROWS)));
  })();

async function countFresh(target: LanceTarget, filter?: string): Promise<number> {
  const db = await lancedb.connect(target.uri);
  try {
    const table = await db.openTable(target.table);
    try {
      return await table.countRows(filter);
    } finally {
      table.close();
    }
  } finally {
    db.close();
  }
}

let dir: string;
beforeEach(async () => {
  dir = await tempDir('kl-cleanup-long-merge');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

test('a merge that read the table before a version cleanup still meets a concurrent insert of the same keys: its rows go in once', async () => {
  const target: LanceTarget = { uri: path.join(dir, 'lance'), table: 'logs' };
  const owner = await LanceTable.connect(target, silentLogger());
  await owner.append({ batches: publication(0), mode: 'insert-if-absent' });

  // The long merge reads the table now...
  const zombieDb = await lancedb.connect(target.uri);
  const zombie = await zombieDb.openTable(target.table);
  expect(await zombie.countRows(`_offset >= 1000`)).toBe(0);

  // ...another owner publishes the same records meanwhile...
  await owner.append({ batches: publication(1000), mode: 'insert-if-absent' });
  // ...and a commit a merge does not conflict with follows (here a delete of nothing;
  // in a running table the compaction and index commits of an earlier optimize): it is
  // the latest version at the cutoff, so the cleanup keeps it and removes the one before.
  const otherDb = await lancedb.connect(target.uri, { readConsistencyInterval: 0 });
  const other = await otherDb.openTable(target.table);
  await other.delete('_offset < 0');
  other.close();
  otherDb.close();

  // The compactor cleans up an hour later (or its clock runs an hour fast): the version
  // of the concurrent insert stopped being the latest long before its cutoff.
  const compactor = await LanceTable.connect(target, silentLogger());
  const outcome = await compactor.optimize(60_000, Date.now() + 3_600_000);
  expect(outcome?.versionsRemoved).toBeGreaterThan(0);
  compactor.close();

  // The long merge commits now.
  const late = await zombie
    .mergeInsert(KEY)
    .whenNotMatchedInsertAll()
    .useIndex(false)
    .execute(new ArrowTable([rowsFor(TOPIC, 0, range(1000, 1000 + ROWS))]));
  zombie.close();
  zombieDb.close();
  owner.close();

  expect(late.numInsertedRows).toBe(0);
  expect(await countFresh(target, '_offset >= 1000 AND _offset < 1100')).toBe(ROWS);
  expect(await countFresh(target)).toBe(2 * ROWS);
}, 60_000);
