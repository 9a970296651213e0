import * as lancedb from '@lancedb/lancedb';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { silentLogger } from '../../src/common/logger';
import { SharedConnections } from '../../src/lance/connect';
import { readTableSchema } from '../../src/lance/known-fields';
import { LanceTable } from '../../src/lance/lance-table';
import { TEST_SCHEMA, range, rowsFor, tempDir } from '../support/rows';

async function rowsIn(uri: string, table: string): Promise<number> {
  const db = await lancedb.connect(uri);
  try {
    const t = await db.openTable(table);
    const n = await t.countRows();
    t.close();
    return n;
  } finally {
    db.close();
  }
}

describe('one Lance connection per database for many tables', () => {
  test('tables of one database share one connection, closed when the last of them closes', async () => {
    const dir = await tempDir('kl-shared-conn');
    try {
      const uri = path.join(dir, 'lance');
      const connections = new SharedConnections();
      const tables = await Promise.all(
        ['a', 'b', 'c'].map((table) => LanceTable.connect({ uri, table }, silentLogger(), { connections })),
      );
      const other = await LanceTable.connect({ uri: path.join(dir, 'other'), table: 'x' }, silentLogger(), {
        connections,
      });
      expect(connections.size).toBe(2);
      tables[0]!.close();
      tables[1]!.close();
      expect(connections.size).toBe(2); // c still uses it
      tables[2]!.close();
      other.close();
      expect(connections.size).toBe(0);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });

  test('an opening check and a create borrow the shared connections: the tables keep writing after them, and closing the tables closes every connection', async () => {
    const dir = await tempDir('kl-shared-conn');
    try {
      const uri = path.join(dir, 'lance');
      const connections = new SharedConnections();
      const first = await LanceTable.connect({ uri, table: 'a' }, silentLogger(), { connections });
      // The check of a table not created yet, on the connection the open table holds.
      expect(await readTableSchema({ uri, table: 'b' }, connections)).toBeUndefined();
      const second = await LanceTable.connect({ uri, table: 'b' }, silentLogger(), { connections });
      const rows = (from: number) =>
        (async function* () {
          yield await Promise.resolve(rowsFor('events', 0, range(from, from + 10)));
        })();
      // Each create borrows the worker's as-opened connection (held by its table until it closes).
      await first.append({ batches: rows(0), beforeAdd: () => Promise.resolve() });
      await second.append({ batches: rows(0), beforeAdd: () => Promise.resolve() });
      expect(connections.size).toBe(2); // latest and as-opened
      expect((await readTableSchema({ uri, table: 'b' }, connections))?.fields.map((f) => f.name)).toEqual(
        expect.arrayContaining(TEST_SCHEMA.fields.map((f) => f.name)),
      );
      await first.append({ batches: rows(10), beforeAdd: () => Promise.resolve() });
      expect(await rowsIn(uri, 'a')).toBe(20);
      first.close();
      await second.append({ batches: rows(10), beforeAdd: () => Promise.resolve() });
      expect(await rowsIn(uri, 'b')).toBe(20);
      second.close();
      await new Promise((r) => setImmediate(r)); // the as-opened connection is released once its borrow settles
      expect(connections.size).toBe(0);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });
});
