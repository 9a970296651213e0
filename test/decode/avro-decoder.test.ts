import * as avro from 'avsc';
import type { WriterSchema } from '../../src/schema-registry/wire-format';
import { SYSTEM_FIELDS } from '../../src/staging/system-columns';
import {
  EVERYTHING_ARROW_TYPES,
  EVERYTHING_EXPECTED,
  EVERYTHING_RECORDS,
  EVERYTHING_SCHEMA,
  framed,
  plainColumn,
} from '../support/avro-fixtures';
import { decoder, msg } from './fixture';

const avroDecoder = () => decoder({ format: 'avro' });
const registered = (id: number, schema: unknown): WriterSchema => ({
  id,
  schemaType: 'AVRO',
  schema: JSON.stringify(schema),
});
const encode = (schema: unknown, value: unknown) =>
  new Uint8Array(avro.Type.forSchema(schema as avro.Schema).toBuffer(value));
const dataFields = (batch: { schema: { fields: { name: string; nullable: boolean }[] } }) =>
  batch.schema.fields.slice(SYSTEM_FIELDS.length);

const V1 = {
  type: 'record',
  name: 'Log',
  fields: [
    { name: 'n', type: 'long' },
    { name: 'message', type: 'string' },
  ],
};
const V2 = { ...V1, fields: [...V1.fields, { name: 'region', type: ['null', 'string'], default: null }] };

describe('Avro records in the Confluent wire format', () => {
  test('every mapped Avro type becomes its Arrow column with the exact value', () => {
    const out = avroDecoder().decode(
      't',
      0,
      EVERYTHING_RECORDS.map((r, i) => msg(i, framed(7, encode(EVERYTHING_SCHEMA, r)))),
      '',
      [registered(7, EVERYTHING_SCHEMA)],
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
    ).toEqual(EVERYTHING_ARROW_TYPES);
    // Top-level columns are nullable: a record of another schema version may lack the field.
    expect(dataFields(batch).every((f) => f.nullable)).toBe(true);
    for (const [name, values] of Object.entries(EVERYTHING_EXPECTED)) {
      expect([name, plainColumn(batch, name)]).toEqual([name, values]);
    }
  });

  test('a long beyond 2^53 is stored exactly, not rounded through a double', () => {
    const schema = { type: 'record', name: 'Big', fields: [{ name: 'l', type: 'long' }] };
    // 2^60 + 1 as Avro's zig-zag varint, written by hand (avsc's own encoder takes doubles).
    const value = 2n ** 60n + 1n;
    let zigzag = value << 1n;
    const bytes: number[] = [];
    while (zigzag >= 0x80n) {
      bytes.push(Number(zigzag & 0x7fn) | 0x80);
      zigzag >>= 7n;
    }
    bytes.push(Number(zigzag));
    const out = avroDecoder().decode('t', 0, [msg(0, framed(3, new Uint8Array(bytes)))], '', [
      registered(3, schema),
    ]);
    expect(out.deadLetters).toEqual([]);
    expect(plainColumn(out.batch!, 'l')).toEqual([value]);
  });

  test("a newer writer schema's new optional field becomes a new nullable column; older records read null there", () => {
    const d = avroDecoder();
    const schemas = [registered(1, V1), registered(2, V2)];
    const out = d.decode(
      't',
      0,
      [
        msg(0, framed(1, encode(V1, { n: 1, message: 'a' }))),
        msg(1, framed(2, encode(V2, { n: 2, message: 'b', region: 'eu' }))),
        msg(2, framed(1, encode(V1, { n: 3, message: 'c' }))),
      ],
      '',
      schemas,
    );
    expect(out.deadLetters).toEqual([]);
    expect(dataFields(out.batch!).map((f) => f.name)).toEqual(['n', 'message', 'region']);
    expect(plainColumn(out.batch!, 'region')).toEqual([null, 'eu', null]);
    // The next batch keeps the column, even when it holds only version-1 records.
    const next = d.decode('t', 0, [msg(3, framed(1, encode(V1, { n: 4, message: 'd' })))], '', schemas);
    expect(dataFields(next.batch!).map((f) => f.name)).toEqual(['n', 'message', 'region']);
    expect(plainColumn(next.batch!, 'region')).toEqual([null]);
  });

  test("a writer schema that changes a column's type starts rows of their own schema (for the publication to set aside), never a dead letter, and the old type's records after it are rows again", () => {
    const changed = { ...V1, fields: [{ name: 'n', type: 'string' }, V1.fields[1]] };
    const d = avroDecoder();
    const schemas = [registered(1, V1), registered(5, changed)];
    const out = d.decode(
      't',
      0,
      [
        msg(0, framed(1, encode(V1, { n: 1, message: 'a' }))),
        msg(1, framed(1, encode(V1, { n: 2, message: 'b' }))),
        msg(2, framed(5, encode(changed, { n: 'three', message: 'c' }))),
        msg(3, framed(5, encode(changed, { n: 'four', message: 'd' }))),
        msg(4, framed(1, encode(V1, { n: 5, message: 'e' }))),
      ],
      '',
      schemas,
    );
    expect(out.deadLetters).toEqual([]);
    expect(out.rows).toBe(5);
    // One batch per run of column types, in offset order: no batch mixes two types of `n`.
    const runs = [...out.earlier.map((s) => s.batch), out.batch!];
    expect(runs.map((b) => String(b.schema.fields.find((f) => f.name === 'n')!.type))).toEqual([
      'Int64',
      'Utf8',
      'Int64',
    ]);
    expect(runs.map((b) => plainColumn(b, '_offset'))).toEqual([[0n, 1n], [2n, 3n], [4n]]);
    expect(runs.map((b) => plainColumn(b, 'n'))).toEqual([[1n, 2n], ['three', 'four'], [5n]]);
    // Each earlier run hands staging only through its own last record.
    expect(out.earlier.map((s) => s.through)).toEqual([1, 3]);
    // A call that begins with the other type has no empty run before it.
    const next = d.decode(
      't',
      0,
      [msg(5, framed(5, encode(changed, { n: 'six', message: 'f' })))],
      '',
      schemas,
    );
    expect(next.earlier).toEqual([]);
    expect(plainColumn(next.batch!, 'n')).toEqual(['six']);
  });

  test('each kind of bad value is a dead letter with its reason and, where it has one, its schema id', () => {
    const good = encode(V1, { n: 1, message: 'hello' });
    const recursive = {
      type: 'record',
      name: 'Node',
      fields: [{ name: 'next', type: ['null', 'Node'] }],
    };
    const out = avroDecoder().decode(
      't',
      0,
      [
        msg(0, new Uint8Array([0x7b, 0x7d])), // "{}": JSON, not framed
        msg(1, Uint8Array.from([1, 0, 0, 0, 1, ...good])), // magic byte 1
        msg(2, framed(404, good)), // the registry does not know 404
        msg(3, framed(1, good.subarray(0, good.length - 2))), // truncated
        msg(4, framed(1, Uint8Array.from([...good, 0, 0]))), // trailing bytes
        msg(5, framed(9, good)), // a Protobuf schema
        msg(6, framed(10, Uint8Array.from([0]))), // a recursive schema
        msg(7, framed(1, good)),
      ],
      '',
      [
        registered(1, V1),
        { id: 404, unknown: 'Schema 404 not found' },
        { id: 9, schemaType: 'PROTOBUF', schema: 'syntax = "proto3"; message M {}' },
        registered(10, recursive),
      ],
    );
    expect(out.deadLetters.map((v) => [v.offset, v.reason])).toEqual([
      [0, 'wrong-magic-byte'],
      [1, 'wrong-magic-byte'],
      [2, 'unknown-schema-id'],
      [3, 'undecodable-payload'],
      [4, 'undecodable-payload'],
      [5, 'unsupported-schema'],
      [6, 'unsupported-schema'],
    ]);
    const details = out.deadLetters.map((v) => v.detail);
    expect(details[0]).toMatch(/2 bytes: the Confluent wire format needs 5/);
    expect(details[1]).toMatch(/magic byte 0x01, not 0x00/);
    expect(details[2]).toMatch(/^schema id 404: the registry has no such schema/);
    expect(details[3]).toMatch(/^schema id 1: .*ends before the datum/);
    expect(details[4]).toMatch(/^schema id 1: .*2 bytes follow the datum/);
    expect(details[5]).toMatch(/^schema id 9: a PROTOBUF schema, and the format is avro/);
    expect(details[6]).toMatch(/^schema id 10: .*Node refers to itself/);
    expect(plainColumn(out.batch!, 'message')).toEqual(['hello']);
  });
});
