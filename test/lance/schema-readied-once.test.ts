import * as lancedb from '@lancedb/lancedb';
import { promises as fsp } from 'node:fs';
import { silentLogger } from '../../src/common/logger';
import { LanceTable, type LanceTarget } from '../../src/lance/lance-table';
import { MESSAGE_COLUMN, range, rowsFor, tempDir } from '../support/rows';

/**
 * A table's handle readies the table for a schema once, and later publications of the
 * same schema read nothing. The hazard: the table changed behind the handle (a column
 * dropped by an operator) and the handle keeps believing it ready, so that every
 * publication fails for good. A failed write makes the handle read the table again.
 */
const TOPIC = 'events';

const batches = (from: number, to: number) =>
  (async function* () {
    yield await Promise.resolve(rowsFor(TOPIC, 0, range(from, to)));
  })();

let dir: string;
beforeEach(async () => {
  dir = await tempDir('kl-schema-once');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

test('a column dropped behind a table’s handle fails one write, and the next write of the same schema adds it back', async () => {
  const target: LanceTarget = { uri: dir, table: TOPIC };
  const writer = await LanceTable.connect(target, silentLogger());
  try {
    await writer.append({ batches: batches(0, 10), beforeAdd: () => Promise.resolve() });
    await writer.append({ batches: batches(10, 20), beforeAdd: () => Promise.resolve() });
    const db = await lancedb.connect(dir);
    const table = await db.openTable(TOPIC);
    await table.dropColumns([MESSAGE_COLUMN]);
    table.close();
    db.close();

    await expect(
      writer.append({ batches: batches(20, 30), beforeAdd: () => Promise.resolve() }),
    ).rejects.toThrow();
    await writer.append({ batches: batches(20, 30), beforeAdd: () => Promise.resolve() });
  } finally {
    writer.close();
  }
  const db = await lancedb.connect(dir);
  const table = await db.openTable(TOPIC);
  const columns = (await table.schema()).fields.map((f) => f.name);
  const again = await table.countRows(`_offset >= 20 AND ${MESSAGE_COLUMN} IS NOT NULL`);
  table.close();
  db.close();
  expect(columns).toContain(MESSAGE_COLUMN);
  expect(again).toBe(10);
});
