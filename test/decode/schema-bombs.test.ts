import * as avro from 'avsc';
import { MAX_VALIDATED_NODES } from '../../src/decode/json-schema/json-schema-payloads';
import { MAX_SCHEMA_DEPTH, MAX_SCHEMA_FIELDS, MAX_TABLE_FIELDS } from '../../src/decode/schema-budget';
import type { WriterSchema } from '../../src/schema-registry/wire-format';
import { framed } from '../support/avro-fixtures';
import { jsonFramed } from '../support/json-schema-fixtures';
import { protobufFramed } from '../support/protobuf-fixtures';
import { avroBomb, avroWide, jsonSchemaBomb, protobufBomb } from '../support/schema-bombs';
import { decoder, msg } from './fixture';

/** 2^16 leaf fields from a few KB of schema: far beyond the field limit, quick to map without one. */
const BOMB_DEPTH = 16;

type Format = 'avro' | 'protobuf' | 'json-schema';
const avroSchema = (s: object): WriterSchema => ({ id: 1, schemaType: 'AVRO', schema: JSON.stringify(s) });

const formats: Record<
  Format,
  { bomb: (depth: number, branches?: number) => WriterSchema; value: () => Uint8Array }
> = {
  avro: {
    bomb: (depth, branches) => avroSchema(avroBomb(depth, branches)),
    value: () => framed(1, new Uint8Array([0])), // one long, 0
  },
  protobuf: {
    bomb: (depth, branches) => ({ id: 1, schemaType: 'PROTOBUF', schema: protobufBomb(depth, branches) }),
    value: () => protobufFramed(1, [0], new Uint8Array(0)),
  },
  'json-schema': {
    bomb: (depth, branches) => ({
      id: 1,
      schemaType: 'JSON',
      schema: JSON.stringify(jsonSchemaBomb(depth, branches)),
    }),
    value: () => jsonFramed(1, '{}'),
  },
};

function verdictOf(format: Format, schema: WriterSchema, value: Uint8Array) {
  return decoder({ format }).decode('t', 0, [msg(0, value)], '', [schema]).deadLetters;
}

describe.each(Object.keys(formats) as Format[])('a %s schema bomb', (format) => {
  const f = formats[format];

  test(`levels that each hold two fields of the next level's type, ${BOMB_DEPTH} deep, make its records unsupported-schema dead letters`, () => {
    const [letter] = verdictOf(format, f.bomb(BOMB_DEPTH), f.value());
    expect(letter).toEqual(expect.objectContaining({ reason: 'unsupported-schema' }));
    expect(letter!.detail).toContain(`more than ${MAX_SCHEMA_FIELDS} fields`);
  });

  test(`a type nested more than ${MAX_SCHEMA_DEPTH} levels deep makes its records unsupported-schema dead letters`, () => {
    const [letter] = verdictOf(format, f.bomb(MAX_SCHEMA_DEPTH + 1, 1), f.value());
    expect(letter).toEqual(expect.objectContaining({ reason: 'unsupported-schema' }));
    expect(letter!.detail).toContain(`more than ${MAX_SCHEMA_DEPTH} levels`);
  });

  test(`a named type used at every level within the limits is mapped (${MAX_SCHEMA_DEPTH} levels deep)`, () => {
    expect(verdictOf(format, f.bomb(MAX_SCHEMA_DEPTH, 1), f.value())).toEqual([]);
  });
});

test('an Avro record of more fields than the limit makes its records unsupported-schema dead letters', () => {
  const [letter] = verdictOf(
    'avro',
    avroSchema(avroWide(MAX_SCHEMA_FIELDS + 1)),
    framed(1, new Uint8Array(0)),
  );
  expect(letter).toEqual(expect.objectContaining({ reason: 'unsupported-schema' }));
});

test('a named Avro type used twice at each of 8 levels keeps its values apart at every use', () => {
  const schema = avroBomb(8);
  const valueAt = (level: number, path: string): object =>
    level === 8
      ? { x: parseInt(path || '0', 2) }
      : { f0: valueAt(level + 1, `${path}0`), f1: valueAt(level + 1, `${path}1`) };
  const value = valueAt(0, '');
  const bytes = new Uint8Array(avro.Type.forSchema(schema as avro.Schema).toBuffer(value));
  const out = decoder({ format: 'avro' }).decode('t', 0, [msg(0, framed(1, bytes))], '', [
    avroSchema(schema),
  ]);
  expect(out.deadLetters).toEqual([]);
  const row = out.batch!.getChild('f1')!.get(0) as { toJSON(): Record<string, unknown> };
  // f1.f1.….f1 (8 levels) is the last leaf: x = 0b1111_1111 after the top level's f1.
  let at: unknown = row.toJSON();
  for (let i = 1; i < 8; i++) at = (at as Record<string, { toJSON(): unknown }>).f1!.toJSON();
  expect((at as { x: bigint }).x).toBe(255n);
});

describe('registry formats are held to maxInferredColumns', () => {
  const avroSchema = (id: number, count: number): WriterSchema => ({
    id,
    schemaType: 'AVRO',
    schema: JSON.stringify(avroWide(count)),
  });
  const longs = (count: number) => framed(0, new Uint8Array(count)); // every long 0

  test('a writer schema with more fields than maxInferredColumns makes its records too-many-columns dead letters', () => {
    const value = longs(300);
    new DataView(value.buffer).setUint32(1, 9);
    const out = decoder({ format: 'avro', maxInferredColumns: 256 }).decode('t', 0, [msg(0, value)], '', [
      avroSchema(9, 300),
    ]);
    expect(out.deadLetters).toEqual([expect.objectContaining({ reason: 'too-many-columns' })]);
  });

  test('versions that keep adding fields stop at maxInferredColumns, and the earlier versions still decode', () => {
    const d = decoder({ format: 'avro', maxInferredColumns: 256 });
    const at = (id: number, count: number) => {
      const value = longs(count);
      new DataView(value.buffer).setUint32(1, id);
      return value;
    };
    const out = d.decode('t', 0, [msg(0, at(1, 200)), msg(1, at(2, 257)), msg(2, at(1, 200))], '', [
      avroSchema(1, 200),
      avroSchema(2, 257),
    ]);
    expect(out.deadLetters).toEqual([expect.objectContaining({ offset: 1, reason: 'too-many-columns' })]);
    expect(out.rows).toBe(2);
  });

  test(`versions that each add a struct of thousands of nested fields stop at ${MAX_TABLE_FIELDS} fields in all, nested ones included`, () => {
    // Each version is within MAX_SCHEMA_FIELDS and adds one column (far under maxInferredColumns),
    // and the table keeps every column the earlier versions made.
    const nested = 4_000;
    const version = (id: number): WriterSchema => ({
      id,
      schemaType: 'AVRO',
      schema: JSON.stringify({
        type: 'record',
        name: 'Growing',
        fields: [{ name: `s${id}`, type: avroWide(nested) }],
      }),
    });
    const at = (id: number) => {
      const value = longs(nested);
      new DataView(value.buffer).setUint32(1, id);
      return value;
    };
    const d = decoder({ format: 'avro', maxInferredColumns: 256 });
    const out = d.decode('t', 0, [msg(0, at(1)), msg(1, at(2)), msg(2, at(3)), msg(3, at(1))], '', [
      version(1),
      version(2),
      version(3),
    ]);
    expect(out.deadLetters).toEqual([
      expect.objectContaining({
        offset: 2,
        reason: 'too-many-columns',
        detail: expect.stringContaining('nested ones included') as unknown,
      }),
    ]);
    expect(out.rows).toBe(3);
  });
});

test(`a JSON Schema of more than ${MAX_VALIDATED_NODES} subschemas is unsupported before its validator is compiled`, () => {
  // ajv's compile time grows with the square of this: 2,000 properties took 3.6 s, 10,001 held a staging lane 78 s.
  const wide = {
    type: 'object',
    properties: Object.fromEntries(
      Array.from({ length: MAX_VALIDATED_NODES }, (_, i) => [`f${i}`, { type: 'integer' }]),
    ),
  };
  const [letter] = decoder({ format: 'json-schema', maxInferredColumns: 10_000 }).decode(
    't',
    0,
    [msg(0, jsonFramed(1, '{}'))],
    '',
    [{ id: 1, schemaType: 'JSON', schema: JSON.stringify(wide) }],
  ).deadLetters;
  expect(letter).toEqual(expect.objectContaining({ reason: 'unsupported-schema' }));
  expect(letter!.detail).toContain(`more than the ${MAX_VALIDATED_NODES}`);
});
