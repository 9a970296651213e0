import * as lancedb from '@lancedb/lancedb';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LanceTable } from '../../src/lance/lance-table';
import { checkoutNewestFrom } from '../../src/lance/newest-by-number';
import { createLogger } from '../../src/common/logger';
import { DDB_COMMIT_TABLE, ddbEndpoint, ddbLocalSuite } from '../support/dynamodb-local';
import { s3DatabaseUri, s3LocalSuite } from '../support/s3-local';

/**
 * A count that decides whether an add committed must see the newest version even when
 * a listing of `_versions/` shows an older one (an S3 server's LIST can come back short
 * under concurrent PUTs; the add is then counted absent and added again). A handle that
 * never reloads stands in for that listing here: its view stays at the version it saw.
 */

const logger = createLogger({ level: 'silent' });
const rows = (from: number, n: number) =>
  Array.from({ length: n }, (_, i) => ({ _topic: 't', _partition: 0, _offset: BigInt(from + i) }));
const all = [{ topic: 't', partition: 0, first: 0, last: 1_000_000 }];

async function scenario(uri: string, storageOptions?: Record<string, string>): Promise<void> {
  const options = storageOptions ? { storageOptions } : {};
  const writer = await lancedb.connect(uri, { readConsistencyInterval: 0, ...options });
  const created = await writer.createTable('events', rows(0, 10));
  const seen = await created.version();
  // A view that stays where it was (no reload): what a short listing shows.
  const stale = await (await lancedb.connect(uri, options)).openTable('events');
  for (let i = 1; i <= 3; i++) await created.add(rows(i * 10, 10));
  expect(await stale.countRows()).toBe(10);

  // From the version seen before the adds, by number: the newest, with all 40 rows.
  expect(await checkoutNewestFrom(stale, seen)).toBe(seen + 3);
  expect(await stale.countRows()).toBe(40);
  // A version number above the listed one (the listing hid the newest): the same.
  const table = await LanceTable.connect({ uri, table: 'events', ...options }, logger);
  try {
    expect(await table.countRowsFrom(all, seen + 2)).toBe(40);
    expect(await table.countRowsFrom(all, seen)).toBe(40);
  } finally {
    table.close();
    stale.close();
    created.close();
  }
}

describe('the newest version read by number, never hidden by a stale listing', () => {
  test('a local table: adds committed after the version a count starts from are all counted', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'newest-by-number-'));
    try {
      await scenario(dir);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('versions removed by a cleanup since the starting version: the count starts from the listed newest', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'newest-by-number-'));
    try {
      const db = await lancedb.connect(dir, { readConsistencyInterval: 0 });
      const t = await db.createTable('events', rows(0, 10));
      const first = await t.version();
      for (let i = 1; i <= 4; i++) await t.add(rows(i * 10, 10));
      await t.optimize({ cleanupOlderThan: new Date(Date.now() + 1000) });
      const kept = (await t.listVersions()).map((v) => v.version);
      expect(kept).not.toContain(first + 1);
      const table = await LanceTable.connect({ uri: dir, table: 'events' }, logger);
      try {
        expect(await table.countRowsFrom(all, first)).toBe(50);
      } finally {
        table.close();
        t.close();
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a starting version above the listed one that no longer exists (the table was created again) falls back to the listed one', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'newest-by-number-'));
    try {
      const db = await lancedb.connect(dir, { readConsistencyInterval: 0 });
      const t = await db.createTable('events', rows(0, 10));
      for (let i = 1; i <= 4; i++) await t.add(rows(i * 10, 10));
      const before = await t.version();
      t.close();
      await db.dropTable('events');
      (await db.createTable('events', rows(0, 5))).close();
      const table = await LanceTable.connect({ uri: dir, table: 'events' }, logger);
      try {
        expect(await table.countRowsFrom(all, before)).toBe(5);
      } finally {
        table.close();
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('on an S3 server (s3proxy with conditional writes), and through a DynamoDB commit table', () => {
    const s3 = s3LocalSuite();
    ddbLocalSuite();
    test('s3://: a missing version reads as the end of the walk, not as a failure of the store', async () => {
      await scenario(s3DatabaseUri('newest'), s3.storageOptions);
    });
    test('s3+ddb://: the commit table answers a missing version in its own words, read the same way', async () => {
      await scenario(
        `${s3DatabaseUri('newest-ddb').replace(/^s3:/, 's3+ddb:')}?ddbTableName=${DDB_COMMIT_TABLE}`,
        {
          ...s3.storageOptions,
          dynamodb_endpoint: ddbEndpoint(),
        },
      );
    });
  });
});
