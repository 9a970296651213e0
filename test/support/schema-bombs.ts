/**
 * Writer schemas whose mapping grows faster than their text: `depth` levels, each holding
 * two fields of the next level's named type (2^depth leaf fields once expanded, in a few
 * KB), one field per level (only deep), or many fields in one (only wide). Shared by the
 * mapping tests and the hostile-input campaign.
 */

const levels = (depth: number) => Array.from({ length: depth }, (_, i) => i);

/** Avro: records L0 … L<depth>, L<i> holding a and b of type L<i+1>; L<depth> holds one long. */
export function avroBomb(depth: number, branches = 2): object {
  let type: object | string = { type: 'record', name: `L${depth}`, fields: [{ name: 'x', type: 'long' }] };
  for (let i = depth - 1; i >= 0; i--) {
    const next: object | string = type;
    type = {
      type: 'record',
      name: `L${i}`,
      // The first use defines the next level, the others refer to it by name.
      fields: Array.from({ length: branches }, (_, b) => ({
        name: `f${b}`,
        type: b === 0 ? next : `L${i + 1}`,
      })),
    };
  }
  return type;
}

/** Avro: one record with `count` long fields. */
export function avroWide(count: number): object {
  return {
    type: 'record',
    name: 'Wide',
    fields: Array.from({ length: count }, (_, i) => ({ name: `f${i}`, type: 'long' })),
  };
}

/** Protobuf: messages L0 … L<depth> as in avroBomb; L0 is the first message (message index [0]). */
export function protobufBomb(depth: number, branches = 2): string {
  const messages = levels(depth).map(
    (i) =>
      `message L${i} { ${Array.from({ length: branches }, (_, b) => `L${i + 1} f${b} = ${b + 1};`).join(' ')} }`,
  );
  return `syntax = "proto3"; package bomb; ${messages.join(' ')} message L${depth} { int64 x = 1; }`;
}

/** JSON Schema: definitions L0 … L<depth> as in avroBomb, the root referring to L0. */
export function jsonSchemaBomb(depth: number, branches = 2): object {
  const definitions: Record<string, object> = {};
  for (const i of levels(depth))
    definitions[`L${i}`] = {
      type: 'object',
      properties: Object.fromEntries(
        Array.from({ length: branches }, (_, b) => [`f${b}`, { $ref: `#/definitions/L${i + 1}` }]),
      ),
    };
  definitions[`L${depth}`] = { type: 'object', properties: { x: { type: 'integer' } } };
  return { $schema: 'http://json-schema.org/draft-07/schema#', $ref: '#/definitions/L0', definitions };
}
