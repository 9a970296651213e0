import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { Field, Int64, Schema } from 'apache-arrow';
import { openTableIfCommitted } from '../../src/lance/open-if-committed';
import { tempDir } from '../support/rows';

test('a table listed before its first version is committed is not there yet; once committed it opens', async () => {
  const dir = await tempDir('kl-open-committed');
  const db = await lancedb.connect(dir);
  try {
    // What a reader sees while another process creates the table: its directory, no version.
    await fsp.mkdir(path.join(dir, 'logs.lance', '_transactions'), { recursive: true });
    expect(await db.tableNames()).toContain('logs');
    await expect(db.openTable('logs')).rejects.toThrow(/was not found/);
    expect(await openTableIfCommitted(db, 'logs')).toBeUndefined();
    expect(await openTableIfCommitted(db, 'other')).toBeUndefined();

    await fsp.rm(path.join(dir, 'logs.lance'), { recursive: true });
    await db.createEmptyTable('logs', new Schema([new Field('n', new Int64(), true)]));
    const table = await openTableIfCommitted(db, 'logs');
    expect(await table?.countRows()).toBe(0);
    table?.close();
  } finally {
    db.close();
    await fsp.rm(dir, { recursive: true, force: true });
  }
});
