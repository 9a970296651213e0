import * as lancedb from '@lancedb/lancedb';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { isCommitConflict, isMergeRefusal, LanceSchemaError } from '../../src/lance/lance-errors';
import { classifyFailure } from '../../src/materializer/failure';
import { tempDir } from '../support/rows';

/**
 * A merge Lance refuses for its rows ("Ambiguous merge inserts are prohibited") fails the
 * same way on every retry: it is classified permanent, so the plan is set aside with its
 * reason instead of stalling its table forever. The text is Lance's own, from a real merge.
 */
let dir: string;
beforeEach(async () => {
  dir = await tempDir('kl-merge-refusal');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

test('an ambiguous merge Lance refuses is a permanent failure (set aside with its reason), not a storage failure retried forever', async () => {
  const db = await lancedb.connect(path.join(dir, 'lance'));
  const table = await db.createTable('t', [{ k: 'a', v: 1 }]);
  const refused = await table
    .mergeInsert('k')
    .whenMatchedUpdateAll()
    .whenNotMatchedInsertAll()
    .execute([
      { k: 'a', v: 2 },
      { k: 'a', v: 3 },
    ])
    .then(
      () => undefined,
      (error: unknown) => error,
    );
  table.close();
  db.close();
  expect(String(refused)).toMatch(/Ambiguous merge insert/);
  expect(isMergeRefusal(refused)).toBe(true);
  expect(isCommitConflict(refused)).toBe(false);
  // What LanceTable makes of it (#writeError), and what the materializer then decides.
  const classified = classifyFailure(new LanceSchemaError('rejected', 't', 'merge refused', {}, refused));
  expect(classified).toMatchObject({ permanent: true, reason: 'schema-incompatible' });
  // A store's failure stays retriable.
  expect(isMergeRefusal(new Error('Generic LocalFileSystem error: No such file or directory'))).toBe(false);
}, 60_000);
