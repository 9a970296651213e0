/**
 * A JSON Schema with every type the JSON Schema mapping handles (src/decode/json-schema/
 * json-schema-mapping.ts), payloads of it, and what each column reads back as. Shared by
 * the decoder's unit tests and the registry round trip.
 */
export const EVERYTHING_JSON_SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'Everything',
  type: 'object',
  properties: {
    i: { type: 'integer' },
    n: { type: 'number' },
    b: { type: 'boolean' },
    s: { type: 'string', minLength: 1 },
    at: { type: 'string', format: 'date-time' },
    day: { type: 'string', format: 'date' },
    opt: { type: ['string', 'null'] },
    point: {
      type: 'object',
      properties: { x: { type: 'number' }, y: { type: 'number' } },
      required: ['x'],
    },
    tags: { type: 'array', items: { type: 'string' } },
    attrs: { type: 'object', additionalProperties: { type: 'integer' } },
    either: { anyOf: [{ type: 'integer' }, { type: 'string' }] },
    maybe: { anyOf: [{ type: 'integer' }, { type: 'null' }] },
    ref: { $ref: '#/definitions/Ref' },
  },
  required: ['i', 's'],
  definitions: { Ref: { type: 'object', properties: { k: { type: 'string' } } } },
} as const;

/** Two payloads as JSON text (the first with an integer beyond 2^53, which must stay exact). */
export const EVERYTHING_JSON_PAYLOADS = [
  '{"i":9223372036854775807,"n":1.5,"b":true,"s":"héllo","at":"2025-12-02T12:00:00.123456Z","day":"2025-12-02","opt":"x","point":{"x":1},"tags":["a","b"],"attrs":{"a":1},"either":"s","maybe":5,"ref":{"k":"v"},"extra":"not a column"}',
  '{"i":-1,"s":"z","opt":null,"either":7}',
] as const;

export const EVERYTHING_JSON_EXPECTED: Record<string, readonly unknown[]> = {
  i: [9_223_372_036_854_775_807n, -1n],
  n: [1.5, null],
  b: [true, null],
  s: ['héllo', 'z'],
  at: [1_764_676_800_123_456n, null],
  day: [20_424, null],
  opt: ['x', null],
  point: [{ x: 1, y: null }, null],
  tags: [['a', 'b'], null],
  attrs: ['{"a":1}', null],
  either: ['"s"', '7'],
  maybe: [5n, null],
  ref: [{ k: 'v' }, null],
};

export const EVERYTHING_JSON_ARROW_TYPES: Record<string, string> = {
  i: 'Int64',
  n: 'Float64',
  b: 'Bool',
  s: 'Utf8',
  at: 'Timestamp<MICROSECOND, UTC>',
  day: 'Date32<DAY>',
  opt: 'Utf8',
  point: 'Struct<{x:Float64, y:Float64}>',
  tags: 'List<Utf8>',
  attrs: 'Utf8',
  either: 'Utf8',
  maybe: 'Int64',
  ref: 'Struct<{k:Utf8}>',
};

/** A JSON Schema serializer's value: magic byte 0, the schema id, the JSON text. */
export function jsonFramed(schemaId: number, text: string): Buffer {
  const header = Buffer.alloc(5);
  header.writeUInt32BE(schemaId, 1);
  return Buffer.concat([header, Buffer.from(text, 'utf8')]);
}
