import * as avro from 'avsc';
import type { WriterSchema } from '../../src/schema-registry/wire-format';
import { framed, plainColumn } from '../support/avro-fixtures';
import { jsonFramed } from '../support/json-schema-fixtures';
import { decoder, msg } from './fixture';

const KEY = {
  type: 'record',
  name: 'Key',
  fields: [
    { name: 'id', type: 'long' },
    { name: 'region', type: 'string' },
  ],
};
const OTHER_KEY = { type: 'record', name: 'Key', fields: [{ name: 'id', type: 'string' }] };
const avroKey = (id: number, value: object, schema: object = KEY) =>
  framed(id, new Uint8Array(avro.Type.forSchema(schema as avro.Schema).toBuffer(value)));
const avroSchema = (id: number, schema: unknown): WriterSchema => ({
  id,
  schemaType: 'AVRO',
  schema: JSON.stringify(schema),
});
const VALUE = { type: 'object', properties: { n: { type: 'integer' } } };
const jsonSchema = (id: number, schema: unknown): WriterSchema => ({
  id,
  schemaType: 'JSON',
  schema: JSON.stringify(schema),
});
const keyed = (offset: number, key: Uint8Array | null, value: Uint8Array) => ({ ...msg(offset, value), key });
const keyType = (batch: { schema: { fields: { name: string; type: unknown }[] } }) =>
  String(batch.schema.fields.find((f) => f.name === '_key')?.type);

describe('keys in their own format (keyFormat beside format)', () => {
  test('an Avro key beside a JSON Schema value becomes a _key struct of its fields; a null key is null', () => {
    const d = decoder({ format: 'json-schema', includeKey: true, keyFormat: 'avro' });
    const out = d.decode(
      't',
      0,
      [
        keyed(0, avroKey(1, { id: 7, region: 'eu' }), jsonFramed(2, '{"n":1}')),
        keyed(1, null, jsonFramed(2, '{"n":2}')),
      ],
      '',
      [avroSchema(1, KEY), jsonSchema(2, VALUE)],
    );
    expect(out.deadLetters).toEqual([]);
    expect(keyType(out.batch!)).toBe('Struct<{id:Int64, region:Utf8}>');
    expect(plainColumn(out.batch!, '_key')).toEqual([{ id: 7n, region: 'eu' }, null]);
    expect(plainColumn(out.batch!, 'n')).toEqual([1n, 2n]);
  });

  test('a batch of only null registry keys carries no _key column (its type is not known yet); the next keyed batch does', () => {
    const d = decoder({ format: 'json-schema', includeKey: true, keyFormat: 'avro' });
    const schemas = [avroSchema(1, KEY), jsonSchema(2, VALUE)];
    const nulls = d.decode('t', 0, [keyed(0, null, jsonFramed(2, '{"n":1}'))], '', schemas);
    expect(nulls.batch!.schema.fields.map((f) => f.name)).not.toContain('_key');
    const next = d.decode(
      't',
      0,
      [
        keyed(1, null, jsonFramed(2, '{"n":2}')),
        keyed(2, avroKey(1, { id: 1, region: 'us' }), jsonFramed(2, '{"n":3}')),
      ],
      '',
      schemas,
    );
    expect(plainColumn(next.batch!, '_key')).toEqual([null, { id: 1n, region: 'us' }]);
  });

  test('bad keys are dead letters naming the key: not framed, unknown schema id, another key schema, not UTF-8', () => {
    const d = decoder({ format: 'json-schema', includeKey: true, keyFormat: 'avro' });
    const out = d.decode(
      't',
      0,
      [
        keyed(0, avroKey(1, { id: 1, region: 'a' }), jsonFramed(2, '{"n":1}')),
        keyed(1, new TextEncoder().encode('plain'), jsonFramed(2, '{"n":2}')),
        keyed(2, avroKey(404, { id: 1, region: 'a' }), jsonFramed(2, '{"n":3}')),
        keyed(3, avroKey(3, { id: 'x' }, OTHER_KEY), jsonFramed(2, '{"n":4}')),
      ],
      '',
      [avroSchema(1, KEY), jsonSchema(2, VALUE), avroSchema(3, OTHER_KEY), { id: 404, unknown: 'not found' }],
    );
    expect(out.deadLetters.map((v) => [v.offset, v.reason])).toEqual([
      [1, 'wrong-magic-byte'],
      [2, 'unknown-schema-id'],
      [3, 'schema-mismatch'],
    ]);
    expect(out.deadLetters[0]!.detail).toMatch(/^the key: /);
    expect(out.deadLetters[1]!.detail).toMatch(/^the key: schema id 404: the registry has no such schema/);
    expect(out.deadLetters[2]).toMatchObject({
      field: '_key',
      detail: expect.stringMatching(
        /schema id 3 makes _key struct<\{id: string\}>, the column is struct<\{id: int64, region: string\}>/,
      ) as unknown,
    });

    const strings = decoder({ includeKey: true, keyFormat: 'string' }).decode('t', 0, [
      msg(0, '{"a":1}', 'user-1'),
      keyed(1, Uint8Array.from([0xff]), new TextEncoder().encode('{"a":2}')),
    ]);
    expect(keyType(strings.batch!)).toBe('Utf8');
    expect(plainColumn(strings.batch!, '_key')).toEqual(['user-1']);
    expect(strings.deadLetters).toEqual([
      {
        offset: 1,
        reason: 'invalid-utf8',
        detail: expect.stringMatching(/the key is not valid UTF-8/) as unknown,
      },
    ]);
  });

  test('the default keyFormat keeps the key as its bytes in a binary _key', () => {
    const out = decoder({ includeKey: true }).decode('t', 0, [msg(0, '{"a":1}', 'k'), msg(1, '{"a":2}')]);
    expect(keyType(out.batch!)).toBe('Binary');
    expect(plainColumn(out.batch!, '_key')).toEqual([[0x6b], null]);
  });

  test("a restarted decoder holds registry keys to the table's _key type, not to the first key schema it sees", () => {
    const WIDER = { ...KEY, fields: [...KEY.fields, { name: 'zone', type: 'string' }] };
    // The table's _key came from KEY; the key schema has since gained a field, and this decoder starts fresh.
    const d = decoder({
      format: 'json-schema',
      includeKey: true,
      keyFormat: 'avro',
      tableKeyType: 'Struct<{id:Int64, region:Utf8}>',
    });
    const out = d.decode(
      't',
      0,
      [
        keyed(0, avroKey(5, { id: 1, region: 'a', zone: 'z' }, WIDER), jsonFramed(2, '{"n":1}')),
        keyed(1, avroKey(1, { id: 2, region: 'b' }), jsonFramed(2, '{"n":2}')),
      ],
      '',
      [avroSchema(5, WIDER), avroSchema(1, KEY), jsonSchema(2, VALUE)],
    );
    expect(out.deadLetters).toEqual([
      expect.objectContaining({ offset: 0, reason: 'schema-mismatch', field: '_key' }),
    ]);
    expect(keyType(out.batch!)).toBe('Struct<{id:Int64, region:Utf8}>');
    expect(plainColumn(out.batch!, '_key')).toEqual([{ id: 2n, region: 'b' }]);
  });
});
