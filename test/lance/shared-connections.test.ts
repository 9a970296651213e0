import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { silentLogger } from '../../src/common/logger';
import { SharedConnections } from '../../src/lance/connect';
import { LanceTable } from '../../src/lance/lance-table';
import { tempDir } from '../support/rows';

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
});
