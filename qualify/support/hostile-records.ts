import * as avro from 'avsc';
import * as protobuf from 'protobufjs';
import { avroBomb, avroWide, jsonSchemaBomb, protobufBomb } from '../../test/support/schema-bombs';
import type { Random } from './random';

/**
 * The records of the hostile-input campaign (qualify/steps/hostile-input.ts): for one
 * format, good records mixed with what anyone allowed to produce to the topic (or to
 * register a schema) can send. Every choice comes from the run's seed.
 */

export type HostileFormat = 'json' | 'avro' | 'protobuf' | 'json-schema';
export const HOSTILE_FORMATS: readonly HostileFormat[] = ['json', 'avro', 'protobuf', 'json-schema'];

/** What the campaign requires of a record's fate: a row, a dead letter, or either (but one of them). */
export type Fate = 'row' | 'dead-letter' | 'either';

export interface HostileRecord {
  readonly kind: string;
  readonly fate: Fate;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers?: Record<string, string | string[]>;
}

/** A topic's records and the parts of its consumer definition that depend on the format. */
export interface HostileTopic {
  readonly definition: Record<string, unknown>;
  /** The first records of every partition, in order (they fix the `_key` type before any hostile key). */
  readonly leading: readonly HostileRecord[];
  /** The rest, shuffled over the partitions. */
  readonly records: readonly HostileRecord[];
  /** Hostile kinds that could not be set up (a schema the registry refused), for the report. */
  readonly skipped: readonly string[];
}

/** Registers a schema under a subject of its own and returns its id (Confluent's API). */
export type Register = (
  subject: string,
  schemaType: 'AVRO' | 'PROTOBUF' | 'JSON',
  schema: string,
) => Promise<number>;

/** The broker's default `message.max.bytes` is 1,048,588 for a whole record batch. */
export const NEAR_MAX_VALUE_BYTES = 1_040_000;

export interface Volumes {
  readonly good: number;
  /** Distinct unknown schema ids in a row (one batch's worth above the decoder's 1,000). */
  readonly churn: number;
  readonly headerFloodKeys: number;
  readonly headerFloods: number;
  readonly bombDepth: number;
}

export function volumes(short: boolean): Volumes {
  return short
    ? { good: 300, churn: 1_001, headerFloodKeys: 20_000, headerFloods: 2, bombDepth: 20 }
    : { good: 5_000, churn: 3_000, headerFloodKeys: 20_000, headerFloods: 10, bombDepth: 21 };
}

export async function hostileTopic(
  format: HostileFormat,
  random: Random,
  v: Volumes,
  register: Register | undefined,
  prefix: string,
): Promise<HostileTopic> {
  switch (format) {
    case 'json':
      return jsonTopic(random, v);
    case 'avro':
      return avroTopic(random, v, register!, prefix);
    case 'protobuf':
      return protobufTopic(random, v, register!, prefix);
    case 'json-schema':
      return jsonSchemaTopic(random, v, register!, prefix);
  }
}

const text = (s: string) => Buffer.from(s, 'utf8');
const INVALID_UTF8 = Buffer.from([0x7b, 0x22, 0x73, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0xff, 0x22, 0x7d]); // {"s":"\xc3(\xff"}
const deepArrays = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
const deepObjects = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);

function headerFlood(keys: number): Record<string, string> {
  const headers: Record<string, string> = {};
  for (let i = 0; i < keys; i++) headers[`h${i}`] = 'v';
  return headers;
}

function framedValue(id: number, payload: Uint8Array, indexes?: readonly number[]): Buffer {
  const header = Buffer.alloc(5);
  header.writeUInt32BE(id, 1);
  // Protobuf: the message-index list, [0] written as the single byte 0.
  const list =
    indexes === undefined
      ? []
      : indexes.length === 1 && indexes[0] === 0
        ? [0]
        : [indexes.length * 2, ...indexes.map((i) => i * 2)];
  return Buffer.concat([header, Buffer.from(list), payload]);
}

/** Records common to every format: header floods on good values, giant values, tombstones. */
function common(v: Volumes, good: () => Buffer, giant: () => Buffer): HostileRecord[] {
  const out: HostileRecord[] = [];
  for (let i = 0; i < v.headerFloods; i++)
    out.push({
      kind: 'header flood',
      fate: 'row',
      key: null,
      value: good(),
      headers: headerFlood(v.headerFloodKeys),
    });
  out.push({
    kind: 'repeated header key',
    fate: 'row',
    key: null,
    value: good(),
    headers: { k: Array.from({ length: 5_000 }, (_, i) => `${i}`) },
  });
  out.push({ kind: "record at the broker's maximum size", fate: 'either', key: null, value: giant() });
  out.push({ kind: 'tombstone', fate: 'dead-letter', key: null, value: null });
  return out;
}

/** Schema-id churn: the 5-byte header alone, each with an id the registry does not have. */
function churn(v: Volumes, random: Random): HostileRecord[] {
  const base = 1_000_000_000 + random.int(0, 1_000_000);
  return Array.from({ length: v.churn }, (_, i) => ({
    kind: 'schema-id churn',
    fate: 'dead-letter' as const,
    key: null,
    value: framedValue(base + i, new Uint8Array(0)),
  }));
}

function shuffle<T>(items: T[], random: Random): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = random.int(0, i);
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

function jsonTopic(random: Random, v: Volumes): HostileTopic {
  let n = 0;
  const goodValue = () =>
    text(
      JSON.stringify({
        n: n++,
        s: `s${random.int(0, 1e6)}`,
        v: [1, 2, 3, 4].map(() => random.next()),
        doc: { a: [1, 'x'] },
      }),
    );
  const good = (): HostileRecord => ({
    kind: 'good',
    fate: 'row',
    key: text(`k${random.int(0, 999)}`),
    value: goodValue(),
  });
  const hostile: HostileRecord[] = [
    ...common(v, goodValue, () => text(JSON.stringify({ n: n++, s: 'x'.repeat(NEAR_MAX_VALUE_BYTES - 40) }))),
    {
      kind: 'deep nesting (arrays)',
      fate: 'either',
      key: null,
      value: text(`{"n":1,"doc":${deepArrays(100_000)}}`),
    },
    {
      kind: 'deep nesting (objects)',
      fate: 'either',
      key: null,
      value: text(`{"n":1,"doc":${deepObjects(50_000)}}`),
    },
    {
      kind: 'giant array',
      fate: 'either',
      key: null,
      value: text(`{"n":1,"doc":[${new Array(200_000).fill(7).join(',')}]}`),
    },
    {
      kind: 'giant string',
      fate: 'row',
      key: null,
      value: text(JSON.stringify({ n: 1, s: 'y'.repeat(500_000) })),
    },
    { kind: 'NaN literal', fate: 'dead-letter', key: null, value: text('{"n":NaN}') },
    {
      kind: 'Infinity (1e999) in a vector',
      fate: 'dead-letter',
      key: null,
      value: text('{"n":1,"v":[1e999,1,2,3]}'),
    },
    { kind: 'Infinity in an int64', fate: 'dead-letter', key: null, value: text('{"n":1e400}') },
    { kind: 'wrong-length vector', fate: 'dead-letter', key: null, value: text('{"n":1,"v":[1,2,3]}') },
    {
      kind: 'giant wrong-length vector',
      fate: 'dead-letter',
      key: null,
      value: text(`{"n":1,"v":[${new Array(100_000).fill(1).join(',')}]}`),
    },
    { kind: 'invalid UTF-8 value', fate: 'dead-letter', key: null, value: INVALID_UTF8 },
    { kind: 'not an object', fate: 'dead-letter', key: null, value: text('[1,2,3]') },
    {
      kind: 'key not UTF-8 (the key changes type)',
      fate: 'dead-letter',
      key: Buffer.from([0xff, 0xfe, 0x00]),
      value: goodValue(),
    },
    {
      kind: 'schema-id churn (framed bytes in a JSON topic)',
      fate: 'dead-letter',
      key: null,
      value: framedValue(123_456, new Uint8Array(0)),
    },
  ];
  return {
    definition: {
      format: 'json',
      includeKey: true,
      keyFormat: 'string',
      schema: {
        fields: {
          n: { type: 'int64', nullable: true },
          s: { type: 'string', nullable: true },
          v: { type: 'vector', dim: 4, nullable: true },
          doc: { type: 'json', nullable: true },
        },
      },
    },
    leading: [good(), good()],
    records: shuffle([...Array.from({ length: v.good }, good), ...hostile], random),
    skipped: [],
  };
}

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

async function avroTopic(
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

async function protobufTopic(
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

async function jsonSchemaTopic(
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
