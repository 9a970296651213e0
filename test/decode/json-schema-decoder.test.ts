import type { WriterSchema } from '../../src/schema-registry/wire-format';
import { SYSTEM_FIELDS } from '../../src/staging/system-columns';
import { plainColumn } from '../support/avro-fixtures';
import {
  EVERYTHING_JSON_ARROW_TYPES,
  EVERYTHING_JSON_EXPECTED,
  EVERYTHING_JSON_PAYLOADS,
  EVERYTHING_JSON_SCHEMA,
  jsonFramed,
} from '../support/json-schema-fixtures';
import { decoder, msg } from './fixture';

const jsonSchemaDecoder = () => decoder({ format: 'json-schema' });
const registered = (id: number, schema: unknown): WriterSchema => ({
  id,
  schemaType: 'JSON',
  schema: JSON.stringify(schema),
});
const dataFields = (batch: { schema: { fields: { name: string; nullable: boolean }[] } }) =>
  batch.schema.fields.slice(SYSTEM_FIELDS.length);

const V1 = {
  type: 'object',
  properties: { n: { type: 'integer' }, message: { type: 'string' } },
  required: ['n', 'message'],
};
const V2 = { ...V1, properties: { ...V1.properties, region: { type: 'string' } } };

describe('JSON Schema values in the Confluent wire format', () => {
  test('every mapped JSON Schema type becomes its Arrow column with the exact value; undeclared properties are not stored', () => {
    const out = jsonSchemaDecoder().decode(
      't',
      0,
      EVERYTHING_JSON_PAYLOADS.map((p, i) => msg(i, jsonFramed(4, p))),
      '',
      [registered(4, EVERYTHING_JSON_SCHEMA)],
    );
    expect(out.deadLetters).toEqual([]);
    const batch = out.batch!;
    expect(
      Object.fromEntries(
        dataFields(batch).map((f) => [
          f.name,
          String(batch.schema.fields.find((x) => x.name === f.name)!.type),
        ]),
      ),
    ).toEqual(EVERYTHING_JSON_ARROW_TYPES);
    expect(dataFields(batch).every((f) => f.nullable)).toBe(true);
    for (const [name, values] of Object.entries(EVERYTHING_JSON_EXPECTED)) {
      expect([name, plainColumn(batch, name)]).toEqual([name, values]);
    }
  });

  test('draft 2020-12 schemas validate with their own draft ($defs, prefixItems)', () => {
    const schema = {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: {
        pair: { type: 'array', prefixItems: [{ type: 'integer' }, { type: 'string' }], items: false },
        p: { $ref: '#/$defs/P' },
      },
      $defs: { P: { type: 'object', properties: { q: { type: 'integer' } } } },
    };
    const out = jsonSchemaDecoder().decode(
      't',
      0,
      [
        msg(0, jsonFramed(5, '{"pair":[1,"a"],"p":{"q":2}}')),
        msg(1, jsonFramed(5, '{"pair":[1,"a","extra"]}')),
      ],
      '',
      [registered(5, schema)],
    );
    expect(out.deadLetters.map((v) => [v.offset, v.reason])).toEqual([[1, 'schema-validation-failed']]);
    expect(plainColumn(out.batch!, 'pair')).toEqual(['[1,"a"]']);
    expect(plainColumn(out.batch!, 'p')).toEqual([{ q: 2n }]);
  });

  test('a value that is not an object, under a schema whose properties do not say type object, is a dead letter, not a row of nulls', () => {
    const schema = { properties: { a: { type: 'integer' } } };
    const out = jsonSchemaDecoder().decode(
      't',
      0,
      [msg(0, jsonFramed(3, '5')), msg(1, jsonFramed(3, '{"a":1}'))],
      '',
      [registered(3, schema)],
    );
    expect(out.deadLetters).toEqual([
      { offset: 0, reason: 'undecodable-payload', detail: 'schema id 3: the payload is not an object' },
    ]);
    expect(plainColumn(out.batch!, 'a')).toEqual([1n]);
  });

  test("a newer writer schema's new optional property becomes a new nullable column; older values read null there", () => {
    const d = jsonSchemaDecoder();
    const out = d.decode(
      't',
      0,
      [
        msg(0, jsonFramed(1, '{"n":1,"message":"a"}')),
        msg(1, jsonFramed(2, '{"n":2,"message":"b","region":"eu"}')),
        msg(2, jsonFramed(1, '{"n":3,"message":"c"}')),
      ],
      '',
      [registered(1, V1), registered(2, V2)],
    );
    expect(out.deadLetters).toEqual([]);
    expect(dataFields(out.batch!).map((f) => f.name)).toEqual(['n', 'message', 'region']);
    expect(plainColumn(out.batch!, 'region')).toEqual([null, 'eu', null]);
  });

  test('each kind of bad value is a dead letter with its reason and the schema id', () => {
    const out = jsonSchemaDecoder().decode(
      't',
      0,
      [
        msg(0, new TextEncoder().encode('{"n":1,"message":"a"}')), // not framed
        msg(1, jsonFramed(404, '{"n":1,"message":"a"}')), // the registry does not know 404
        msg(2, jsonFramed(1, '{"n":1,')), // not JSON
        msg(3, jsonFramed(1, '{"n":1.5,"message":"a"}')), // the schema says integer
        msg(4, jsonFramed(1, '{"n":1}')), // a required property missing
        msg(5, Uint8Array.from([0, 0, 0, 0, 1, 0x22, 0xff, 0x22])), // not UTF-8
        msg(6, jsonFramed(9, '{}')), // a Protobuf schema
        msg(7, jsonFramed(1, '{"n":99999999999999999999,"message":"big"}')), // valid, beyond int64
        msg(8, jsonFramed(1, '{"n":2,"message":"ok"}')),
      ],
      '',
      [
        registered(1, V1),
        { id: 404, unknown: 'Schema 404 not found' },
        { id: 9, schemaType: 'PROTOBUF', schema: 'syntax = "proto3"; message M { int32 a = 1; }' },
      ],
    );
    expect(out.deadLetters.map((v) => [v.offset, v.reason])).toEqual([
      [0, 'wrong-magic-byte'],
      [1, 'unknown-schema-id'],
      [2, 'undecodable-payload'],
      [3, 'schema-validation-failed'],
      [4, 'schema-validation-failed'],
      [5, 'undecodable-payload'],
      [6, 'unsupported-schema'],
      [7, 'schema-mismatch'],
    ]);
    const details = out.deadLetters.map((v) => v.detail);
    expect(details[1]).toMatch(/^schema id 404: the registry has no such schema/);
    expect(details[2]).toMatch(/^schema id 1: the payload is not JSON/);
    expect(details[3]).toMatch(/^schema id 1: the writer schema rejects the payload: at \/n must be integer/);
    expect(details[4]).toMatch(
      /^schema id 1: the writer schema rejects the payload: the value must have required property 'message'/,
    );
    expect(details[5]).toMatch(/^schema id 1: the payload is not valid UTF-8/);
    expect(details[6]).toMatch(/^schema id 9: a PROTOBUF schema, and the format is json-schema/);
    expect(details[7]).toMatch(/field "n"/);
    expect(plainColumn(out.batch!, 'message')).toEqual(['ok']);
  });
});
