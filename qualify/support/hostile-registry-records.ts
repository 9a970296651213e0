import * as avro from 'avsc';
import * as protobuf from 'protobufjs';
import { avroBomb, avroWide, jsonSchemaBomb, protobufBomb } from '../../test/support/schema-bombs';
import {
  churn,
  common,
  deepArrays,
  framedValue,
  INVALID_UTF8,
  NEAR_MAX_VALUE_BYTES,
  shuffle,
  text,
  type Fate,
  type HostileRecord,
  type HostileTopic,
  type Register,
  type Volumes,
} from './hostile-records';
import type { Random } from './random';

/**
 * The hostile-input campaign's registry-format topics (Avro, Protobuf, JSON Schema): good
 * records of a registered schema mixed with schema-id churn, schema bombs registered for
 * real, and values and keys that a registry format's producer can get wrong.
 */

const AVRO_GOOD = {
  type: 'record',
  name: 'Good',
  namespace: 'hostile',
  fields: [
    { name: 'n', type: 'long' },
    { name: 's', type: 'string' },
    { name: 'd', type: 'double' },
    { name: 'tags', type: { type: 'array', items: 'string' } },
  ],
};
const AVRO_KEY = {
  type: 'record',
  name: 'Key',
  namespace: 'hostile',
  fields: [{ name: 'id', type: 'long' }],
};
const AVRO_OTHER_KEY = {
  type: 'record',
  name: 'Key',
  namespace: 'hostile.other',
  fields: [
    { name: 'id', type: 'string' },
    { name: 'zone', type: 'string' },
  ],
};

/** Registers each schema; one the registry refuses is skipped and named. */
async function registerAll(
  register: Register,
  prefix: string,
  schemaType: 'AVRO' | 'PROTOBUF' | 'JSON',
  schemas: Record<string, string>,
  skipped: string[],
): Promise<Map<string, number>> {
  const ids = new Map<string, number>();
  for (const [name, schema] of Object.entries(schemas)) {
    try {
      ids.set(name, await register(`${prefix}-${name.replace(/[^a-z0-9]+/gi, '-')}`, schemaType, schema));
    } catch (error) {
      skipped.push(`${name} (the registry refused it: ${String(error).slice(0, 160)})`);
    }
  }
  return ids;
}

/**
 * Records of each bomb schema the registry took (a few bytes of payload: the schema alone
 * decides). Nested, recursive and wide schemas must be refused (unsupported-schema); a huge
 * enum or union maps to few columns, and its records may be rows.
 */
function bombRecords(
  ids: Map<string, number>,
  names: readonly string[],
  payload: (id: number) => Buffer,
): HostileRecord[] {
  return names.flatMap((name) => {
    const id = ids.get(name);
    const fate: Fate = /^(nested|recursive|wide)/.test(name) ? 'dead-letter' : 'either';
    return id === undefined
      ? []
      : [0, 1].map(() => ({ kind: `schema bomb: ${name}`, fate, key: null, value: payload(id) }));
  });
}

export async function avroTopic(
  random: Random,
  v: Volumes,
  register: Register,
  prefix: string,
): Promise<HostileTopic> {
  const skipped: string[] = [];
  const enumSymbols = Array.from({ length: 20_000 }, (_, i) => `S${i}`);
  const unionOfRecords = Array.from({ length: 3_000 }, (_, i) => ({
    type: 'record',
    name: `U${i}`,
    fields: [{ name: 'x', type: 'long' }],
  }));
  const schemas: Record<string, string> = {
    good: JSON.stringify(AVRO_GOOD),
    key: JSON.stringify(AVRO_KEY),
    otherKey: JSON.stringify(AVRO_OTHER_KEY),
    [`nested bomb, depth ${v.bombDepth}`]: JSON.stringify(avroBomb(v.bombDepth)),
    recursive: JSON.stringify({ type: 'record', name: 'R', fields: [{ name: 'next', type: ['null', 'R'] }] }),
    'wide (10,001 fields)': JSON.stringify(avroWide(10_001)),
    'huge union (3,000 records)': JSON.stringify({
      type: 'record',
      name: 'HU',
      fields: [{ name: 'u', type: unionOfRecords }],
    }),
    'huge enum (20,000 symbols)': JSON.stringify({
      type: 'record',
      name: 'HE',
      fields: [{ name: 'e', type: { type: 'enum', name: 'E', symbols: enumSymbols } }],
    }),
  };
  const ids = await registerAll(register, prefix, 'AVRO', schemas, skipped);
  const goodId = ids.get('good');
  const keyId = ids.get('key');
  if (goodId === undefined || keyId === undefined)
    throw new Error(`the registry refused the good Avro schemas: ${skipped.join('; ')}`);
  const goodType = avro.Type.forSchema(AVRO_GOOD as avro.Schema);
  const keyType = avro.Type.forSchema(AVRO_KEY as avro.Schema);
  let n = 0;
  const encodeGood = (s: string, d = random.next(), tags: string[] = ['a', 'b']) =>
    framedValue(goodId, goodType.toBuffer({ n: n++, s, d, tags }));
  const key = () => framedValue(keyId, keyType.toBuffer({ id: random.int(0, 1e6) }));
  const good = (): HostileRecord => ({
    kind: 'good',
    fate: 'row',
    key: key(),
    value: encodeGood(`s${random.int(0, 1e6)}`),
  });
  const hostile: HostileRecord[] = [
    ...common(
      v,
      () => encodeGood('flooded'),
      () => encodeGood('x'.repeat(NEAR_MAX_VALUE_BYTES - 40)),
    ),
    ...churn(v, random),
    ...bombRecords(ids, Object.keys(schemas).slice(3), (id) => framedValue(id, new Uint8Array([0, 0, 0, 0]))),
    { kind: 'NaN double', fate: 'row', key: key(), value: encodeGood('nan', Number.NaN) },
    { kind: 'Infinity double', fate: 'row', key: key(), value: encodeGood('inf', Number.POSITIVE_INFINITY) },
    {
      kind: 'giant array',
      fate: 'row',
      key: key(),
      value: encodeGood('tags', 0, new Array<string>(100_000).fill('t')),
    },
    {
      kind: 'truncated payload',
      fate: 'dead-letter',
      key: key(),
      value: encodeGood('truncated').subarray(0, 7),
    },
    {
      kind: 'invalid UTF-8 in a string',
      fate: 'either',
      key: key(),
      value: Buffer.concat([
        framedValue(goodId, Buffer.from([2])),
        Buffer.from([4, 0xc3, 0x28]),
        Buffer.alloc(9),
      ]),
    },
    { kind: 'wrong magic byte', fate: 'dead-letter', key: key(), value: Buffer.from([1, 0, 0, 0, 1, 2]) },
  ];
  const otherKeyId = ids.get('otherKey');
  if (otherKeyId !== undefined) {
    const otherKey = avro.Type.forSchema(AVRO_OTHER_KEY as avro.Schema);
    for (let i = 0; i < 5; i++)
      hostile.push({
        kind: 'key schema of another type',
        fate: 'dead-letter',
        key: framedValue(otherKeyId, otherKey.toBuffer({ id: 'x', zone: 'z' })),
        value: encodeGood('k'),
      });
  }
  hostile.push({
    kind: 'key with an unknown schema id',
    fate: 'dead-letter',
    key: framedValue(2_000_000_000, new Uint8Array(0)),
    value: encodeGood('k'),
  });
  return {
    definition: { format: 'avro', schema: 'infer', includeKey: true, keyFormat: 'avro' },
    leading: [good(), good()],
    records: shuffle([...Array.from({ length: v.good }, good), ...hostile], random),
    skipped,
  };
}

const PROTO_GOOD =
  'syntax = "proto3"; package hostile; message Good { int64 n = 1; string s = 2; double d = 3; repeated string tags = 4; }';

export async function protobufTopic(
  random: Random,
  v: Volumes,
  register: Register,
  prefix: string,
): Promise<HostileTopic> {
  const skipped: string[] = [];
  const wide = `syntax = "proto3"; package hostile; message Wide { ${Array.from({ length: 10_001 }, (_, i) => `int64 f${i} = ${i + 1};`).join(' ')} }`;
  const hugeEnum = `syntax = "proto3"; package hostile; message HE { E e = 1; } enum E { ${Array.from({ length: 20_000 }, (_, i) => `E${i} = ${i};`).join(' ')} }`;
  const schemas: Record<string, string> = {
    good: PROTO_GOOD,
    [`nested bomb, depth ${v.bombDepth}`]: protobufBomb(v.bombDepth),
    recursive: 'syntax = "proto3"; package hostile; message R { R next = 1; int64 x = 2; }',
    'wide (10,001 fields)': wide,
    'huge enum (20,000 values)': hugeEnum,
  };
  const ids = await registerAll(register, prefix, 'PROTOBUF', schemas, skipped);
  const goodId = ids.get('good');
  if (goodId === undefined)
    throw new Error(`the registry refused the good Protobuf schema: ${skipped.join('; ')}`);
  const type = protobuf
    .parse(PROTO_GOOD, new protobuf.Root(), { keepCase: true })
    .root.lookupType('hostile.Good');
  let n = 0;
  const encode = (s: string, d = random.next(), tags: string[] = ['a']) =>
    framedValue(goodId, type.encode(type.fromObject({ n: n++, s, d, tags })).finish(), [0]);
  const good = (): HostileRecord => ({
    kind: 'good',
    fate: 'row',
    key: null,
    value: encode(`s${random.int(0, 1e6)}`),
  });
  const hostile: HostileRecord[] = [
    ...common(
      v,
      () => encode('flooded'),
      () => encode('x'.repeat(NEAR_MAX_VALUE_BYTES - 40)),
    ),
    ...churn(v, random),
    ...bombRecords(ids, Object.keys(schemas).slice(1), (id) => framedValue(id, new Uint8Array(0), [0])),
    { kind: 'NaN double', fate: 'row', key: null, value: encode('nan', Number.NaN) },
    { kind: 'Infinity double', fate: 'row', key: null, value: encode('inf', Number.NEGATIVE_INFINITY) },
    {
      kind: 'giant array',
      fate: 'row',
      key: null,
      value: encode('tags', 0, new Array<string>(100_000).fill('t')),
    },
    // Field 2 (s), length-delimited, 3 bytes that are not UTF-8.
    {
      kind: 'invalid UTF-8 in a string',
      fate: 'dead-letter',
      key: null,
      value: framedValue(goodId, Buffer.from([0x12, 3, 0xc3, 0x28, 0xff]), [0]),
    },
    {
      kind: 'truncated payload',
      fate: 'dead-letter',
      key: null,
      value: framedValue(goodId, Buffer.from([0x12, 50, 0x61]), [0]),
    },
    {
      kind: 'message index out of range',
      fate: 'dead-letter',
      key: null,
      value: framedValue(goodId, new Uint8Array(0), [7]),
    },
  ];
  return {
    definition: { format: 'protobuf', schema: 'infer' },
    leading: [good(), good()],
    records: shuffle([...Array.from({ length: v.good }, good), ...hostile], random),
    skipped,
  };
}

const JSON_SCHEMA_GOOD = {
  type: 'object',
  properties: {
    n: { type: 'integer' },
    s: { type: 'string' },
    d: { type: 'number' },
    tags: { type: 'array', items: { type: 'string' } },
    doc: {},
  },
  required: ['n'],
};

export async function jsonSchemaTopic(
  random: Random,
  v: Volumes,
  register: Register,
  prefix: string,
): Promise<HostileTopic> {
  const skipped: string[] = [];
  const wide = {
    type: 'object',
    properties: Object.fromEntries(Array.from({ length: 10_001 }, (_, i) => [`f${i}`, { type: 'integer' }])),
  };
  const schemas: Record<string, string> = {
    good: JSON.stringify(JSON_SCHEMA_GOOD),
    [`nested bomb, depth ${v.bombDepth}`]: JSON.stringify(jsonSchemaBomb(v.bombDepth)),
    'wide (10,001 properties)': JSON.stringify(wide),
  };
  const ids = await registerAll(register, prefix, 'JSON', schemas, skipped);
  const goodId = ids.get('good');
  if (goodId === undefined)
    throw new Error(`the registry refused the good JSON Schema: ${skipped.join('; ')}`);
  let n = 0;
  const encode = (value: object | string) =>
    framedValue(goodId, text(typeof value === 'string' ? value : JSON.stringify(value)));
  const goodValue = () => encode({ n: n++, s: `s${random.int(0, 1e6)}`, d: random.next(), tags: ['a'] });
  const good = (): HostileRecord => ({ kind: 'good', fate: 'row', key: null, value: goodValue() });
  const hostile: HostileRecord[] = [
    ...common(v, goodValue, () => encode({ n: n++, s: 'x'.repeat(NEAR_MAX_VALUE_BYTES - 40) })),
    ...churn(v, random),
    ...bombRecords(ids, Object.keys(schemas).slice(1), (id) => framedValue(id, text('{}'))),
    {
      kind: 'deep nesting in a json column',
      fate: 'either',
      key: null,
      value: encode(`{"n":1,"doc":${deepArrays(100_000)}}`),
    },
    {
      kind: 'giant array',
      fate: 'row',
      key: null,
      value: encode({ n: 1, tags: new Array<string>(100_000).fill('t') }),
    },
    { kind: 'NaN literal', fate: 'dead-letter', key: null, value: encode('{"n":NaN}') },
    { kind: 'Infinity (1e999) in a number', fate: 'either', key: null, value: encode('{"n":1,"d":1e999}') },
    {
      kind: 'integer beyond int64',
      fate: 'dead-letter',
      key: null,
      value: encode('{"n":123456789012345678901234567890}'),
    },
    { kind: 'fails its schema', fate: 'dead-letter', key: null, value: encode({ s: 'no n' }) },
    { kind: 'invalid UTF-8 value', fate: 'dead-letter', key: null, value: framedValue(goodId, INVALID_UTF8) },
  ];
  return {
    definition: { format: 'json-schema', schema: 'infer' },
    leading: [good(), good()],
    records: shuffle([...Array.from({ length: v.good }, good), ...hostile], random),
    skipped,
  };
}
