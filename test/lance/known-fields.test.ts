import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { Bool, Field, Float64, Int64, Schema, Utf8 } from 'apache-arrow';
import { readKnownFields } from '../../src/lance/known-fields';
import { decodeAll, decoder } from '../decode/fixture';
import { tempDir } from '../support/rows';

describe('inferred columns seeded from the table', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await tempDir('kl-known');
    const db = await lancedb.connect(dir);
    await db.createEmptyTable(
      'logs',
      new Schema([
        new Field('v', new Float64(), true),
        new Field('ok', new Bool(), true),
        new Field('s', new Utf8(), true),
        new Field('_offset', new Int64(), false),
      ]),
    );
    db.close();
  });
  afterAll(() => fsp.rm(dir, { recursive: true, force: true }));

  test('a table column keeps its type in every worker: {"v":"1"} is a dead letter at decode time', async () => {
    const known = await readKnownFields({ uri: dir, table: 'logs' });
    // Utf8 is not seeded (string and json are both Utf8); system columns never are.
    expect(known).toEqual([
      { name: 'v', type: 'float64' },
      { name: 'ok', type: 'boolean' },
    ]);
    // A worker whose first value of v is a string: without the seed it would stage Utf8
    // next to the table's Float64, and the publication would be refused.
    const out = decodeAll(decoder({ knownFields: known }), ['{"v":"1"}', '{"v":2}']);
    expect(out.deadLetters).toEqual([
      expect.objectContaining({ offset: 0, reason: 'schema-mismatch', field: 'v' }),
    ]);
    const v = out.batch?.schema.fields.find((f) => f.name === 'v');
    expect(v && String(v.type as unknown)).toBe('Float64');
  });

  test('no table yet: nothing is seeded', async () => {
    await expect(readKnownFields({ uri: path.join(dir, 'empty'), table: 'logs' })).resolves.toEqual([]);
  });
});
