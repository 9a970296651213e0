import { promises as fsp } from 'node:fs';
import * as lancedb from '@lancedb/lancedb';
import { Field, Int64, Schema, Table as ArrowTable, Utf8, vectorFromArray } from 'apache-arrow';
import { checkTableOpening, tableOpeningProblems, TableRefusedError } from '../../src/lance/table-opening';
import { tempDir } from '../support/rows';

let dir: string;
beforeEach(async () => {
  dir = await tempDir('kl-opening');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

/** A table keyed on `id` as an upsert table is (Lance's unenforced primary key), or an append table without key. */
async function createTable(name: string, keyed: boolean): Promise<void> {
  const key = keyed
    ? new Map([
        ['lance-schema:unenforced-primary-key', 'true'],
        ['lance-schema:unenforced-primary-key:position', '0'],
      ])
    : new Map<string, string>();
  const schema = new Schema([new Field('id', new Int64(), false, key), new Field('note', new Utf8(), true)]);
  const db = await lancedb.connect(dir);
  const t = await db.createTable(
    name,
    new ArrowTable(schema, {
      id: vectorFromArray([1n], new Int64()),
      note: vectorFromArray(['a'], new Utf8()),
    }),
  );
  t.close();
  db.close();
}

const append = { fields: undefined, epochUnit: 'ms', upsertKey: undefined } as const;

describe('opening a table: the start checks for every table', () => {
  test('a table that does not exist yet passes (its first publication creates it)', async () => {
    expect(await tableOpeningProblems({ uri: dir, table: 'absent' }, append)).toEqual([]);
  });

  test('an append definition on an upsert table is refused naming mode; an upsert on another key naming key', async () => {
    await createTable('keyed', true);
    const target = { uri: dir, table: 'keyed' };
    expect((await tableOpeningProblems(target, append)).map((p) => p.field)).toEqual(['mode']);
    expect(
      (await tableOpeningProblems(target, { ...append, upsertKey: ['other'] })).map((p) => p.field),
    ).toEqual(['key']);
    expect(await tableOpeningProblems(target, { ...append, upsertKey: ['id'] })).toEqual([]);
  });

  test('a declared field whose column has another type is refused naming the field and the table', async () => {
    await createTable('plain', false);
    const target = { uri: dir, table: 'plain' };
    const fields = [{ name: 'note', type: 'int64', nullable: true } as const];
    const refused = await checkTableOpening(target, { ...append, fields }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(TableRefusedError);
    expect((refused as TableRefusedError).problems.map((p) => p.field)).toEqual(['schema.fields.note']);
    expect((refused as TableRefusedError).message).toContain('column "note" of Lance table plain is Utf8');
    // The same type, or a field the table lacks (a new nullable column), passes.
    await checkTableOpening(target, {
      ...append,
      fields: [
        { name: 'note', type: 'string', nullable: true },
        { name: 'added', type: 'int64', nullable: true },
      ],
    });
  });
});
