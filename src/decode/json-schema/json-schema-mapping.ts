import type { DeclaredField, NamedField } from '../../config';
import { columnNameProblem } from '../../config/column-name';
import { SchemaBudget } from '../schema-budget';

/**
 * How a JSON Schema becomes columns. The payload is JSON, read exactly (exact-json.ts),
 * and the column codecs (typed-codecs.ts) convert its values, so the mapping only picks
 * each column's type from what the schema declares:
 *
 * - A top-level `object` with `properties`: one column per property, every column
 *   nullable (a record of another schema version may lack it). Only declared properties
 *   are stored. Any other top-level schema: one column, `value`.
 * - `integer` → int64 (a value beyond int64 is a dead letter, not rounded), `number` →
 *   float64, `boolean` → boolean, `string` → string; `string` with `format: date-time`
 *   → timestamp(µs, UTC), with `format: date` → date.
 * - `object` with `properties` → struct; `array` with an `items` schema → list.
 * - Nullable: `type: [T, "null"]`, an `anyOf`/`oneOf` of T and `{type: "null"}`, or a
 *   property not in its object's `required`.
 * - Anything without one declared type (several types, `anyOf` of several, an object
 *   without `properties` such as a map, an array without `items`, a recursive `$ref`)
 *   → json: the value's JSON text, exact. Local `$ref`s (`#/definitions/…`, `#/$defs/…`)
 *   are followed. A schema beyond the limits of schema-budget.ts is unsupported (a `$ref`
 *   counts at each use; it is mapped again at each, since what a recursive one maps to
 *   depends on where it is used, and the count bounds that work).
 */
export interface JsonSchemaColumns {
  readonly fields: readonly NamedField[];
  readonly toRow: (value: unknown) => Record<string, unknown> | undefined;
}

export class UnsupportedJsonSchema extends Error {}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

export const VALUE_COLUMN = 'value';

export function jsonSchemaColumns(schema: Json): JsonSchemaColumns {
  const mapping = new SchemaMapping(schema);
  const top = mapping.resolve(schema);
  if (isObject(top) && declaredType(top) === 'object' && isObject(top.properties)) {
    const fields = mapping.properties(top).map(({ name, field }) => ({ name, ...field, nullable: true }));
    return {
      fields,
      // A schema with `properties` but no `type` lets any non-object through the validator.
      toRow: (value) =>
        value !== null && typeof value === 'object' && !Array.isArray(value)
          ? (value as Record<string, unknown>)
          : undefined,
    };
  }
  const field = mapping.field(schema);
  return {
    fields: [{ name: VALUE_COLUMN, ...field, nullable: true }],
    toRow: (value) => ({ [VALUE_COLUMN]: value }),
  };
}

const JSON_COLUMN: DeclaredField = { type: 'json', nullable: true };

class SchemaMapping {
  readonly #open = new Set<string>();
  readonly #budget = new SchemaBudget((why) => new UnsupportedJsonSchema(why));

  constructor(private readonly root: Json) {}

  /** A local `$ref` → the schema it points at (other refs are not followed). */
  resolve(schema: Json): Json {
    let s = schema;
    for (let hops = 0; isObject(s) && typeof s.$ref === 'string'; hops++) {
      if (hops > 32) throw new UnsupportedJsonSchema(`$ref chain too long at ${s.$ref}`);
      const ref = s.$ref;
      if (!ref.startsWith('#')) throw new UnsupportedJsonSchema(`$ref "${ref}" is not local to the schema`);
      s = pointer(this.root, ref.slice(1));
    }
    return s;
  }

  properties(object: JsonObject): { name: string; field: DeclaredField }[] {
    const required = new Set(Array.isArray(object.required) ? object.required : []);
    return Object.entries(object.properties as JsonObject).map(([name, schema]) => {
      const problem = columnNameProblem(name);
      if (problem !== undefined) throw new UnsupportedJsonSchema(`property "${name}": ${problem}`);
      this.#budget.fields();
      const field = this.field(schema);
      return { name, field: { ...field, nullable: field.nullable || !required.has(name) } };
    });
  }

  field(schema: Json): DeclaredField {
    const ref = isObject(schema) && typeof schema.$ref === 'string' ? schema.$ref : undefined;
    if (ref !== undefined) {
      // A schema that contains itself is JSON's to hold, not Arrow's: the whole value as json.
      if (this.#open.has(ref)) return JSON_COLUMN;
      this.#open.add(ref);
      try {
        return this.field(this.resolve(schema));
      } finally {
        this.#open.delete(ref);
      }
    }
    if (schema === true || !isObject(schema)) return JSON_COLUMN;
    const alternatives = Array.isArray(schema.anyOf)
      ? schema.anyOf
      : Array.isArray(schema.oneOf)
        ? schema.oneOf
        : undefined;
    if (alternatives) {
      const nonNull = alternatives.filter((a) => !(isObject(a) && a.type === 'null'));
      if (nonNull.length !== 1) return JSON_COLUMN;
      const one = this.field(nonNull[0]!);
      return { ...one, nullable: one.nullable || nonNull.length < alternatives.length };
    }
    const types = Array.isArray(schema.type)
      ? schema.type
      : typeof schema.type === 'string'
        ? [schema.type]
        : [];
    const nullable = types.includes('null');
    const type = declaredType(schema);
    switch (type) {
      case 'integer':
        return { type: 'int64', nullable };
      case 'number':
        return { type: 'float64', nullable };
      case 'boolean':
        return { type: 'boolean', nullable };
      case 'string':
        if (schema.format === 'date-time')
          return { type: 'timestamp', unit: 'us', timezone: 'UTC', nullable };
        if (schema.format === 'date') return { type: 'date', nullable };
        return { type: 'string', nullable };
      case 'object': {
        if (!isObject(schema.properties) || Object.keys(schema.properties).length === 0) return JSON_COLUMN;
        const fields = this.#budget.nested(() =>
          this.properties(schema).map(({ name, field }) => ({ name, ...field })),
        );
        return { type: 'struct', fields, nullable };
      }
      case 'array': {
        const itemSchema = schema.items;
        if (!isObject(itemSchema)) return JSON_COLUMN;
        const items = this.#budget.nested(() => this.field(itemSchema));
        return { type: 'list', items, nullable };
      }
      default:
        return JSON_COLUMN;
    }
  }
}

/** The one non-null type a schema declares (`properties` alone means object, `items` array), if one. */
function declaredType(schema: JsonObject): string | undefined {
  const types = Array.isArray(schema.type)
    ? schema.type
    : typeof schema.type === 'string'
      ? [schema.type]
      : [];
  const nonNull = types.filter((t) => t !== 'null');
  if (nonNull.length === 1) return nonNull[0] as string;
  if (nonNull.length > 1) return undefined;
  if (isObject(schema.properties)) return 'object';
  if (isObject(schema.items)) return 'array';
  return undefined;
}

/** A JSON Pointer (RFC 6901) into the schema. */
function pointer(root: Json, path: string): Json {
  let at: Json = root;
  for (const raw of path.split('/').slice(1)) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    const next: Json | undefined = Array.isArray(at) ? at[Number(key)] : isObject(at) ? at[key] : undefined;
    if (next === undefined) throw new UnsupportedJsonSchema(`$ref "#${path}" points at nothing`);
    at = next;
  }
  return at;
}

function isObject(v: Json | undefined): v is JsonObject {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}
