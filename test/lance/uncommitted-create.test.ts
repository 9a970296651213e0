import * as lancedb from '@lancedb/lancedb';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { silentLogger } from '../../src/common/logger';
import { LanceTable, type LanceTarget } from '../../src/lance/lance-table';
import { range, rowsFor, tempDir } from '../support/rows';

/**
 * A replica SIGKILLed while it created its table leaves the table's directory with data
 * files and no committed version: listed by the store, "not found" when opened. Taken for
 * a table another writer is about to commit, every publication of it was retried for
 * ever (the table stalled). It is a table that does not exist yet: the next write creates it.
 */
const TABLE = 'logs';

const batches = (from: number, to: number) =>
  (async function* () {
    yield await Promise.resolve(rowsFor(TABLE, 0, range(from, to)));
  })();

test('a table whose create was killed before its first version is created by the next write, not retried for ever', async () => {
  const dir = await tempDir('kl-uncommitted-create');
  try {
    // What the killed create left: the table's directory and a data file, no _versions.
    await fsp.mkdir(path.join(dir, `${TABLE}.lance`, 'data'), { recursive: true });
    await fsp.writeFile(path.join(dir, `${TABLE}.lance`, 'data', 'orphan.lance'), Buffer.alloc(64));
    const listed = await lancedb.connect(dir);
    expect(await listed.tableNames()).toContain(TABLE);
    listed.close();

    const target: LanceTarget = { uri: dir, table: TABLE };
    const writer = await LanceTable.connect(target, silentLogger());
    try {
      await writer.append({ batches: batches(0, 10), beforeAdd: () => Promise.resolve() });
      expect(await writer.totalRows()).toBe(10);
    } finally {
      writer.close();
    }
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
});
