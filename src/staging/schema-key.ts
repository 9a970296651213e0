import { createHash } from 'node:crypto';
import type { DataType, Field, Schema } from 'apache-arrow';

/**
 * A stable 16-hex-digit hash of an Arrow schema: field names, types (with their
 * children) and nullability, in order. Metadata is left out on purpose: it does
 * not change how rows are stored, and it must not split a table's parts.
 */
export type SchemaKey = string & { readonly __schemaKey: unique symbol };

const cache = new WeakMap<Schema, SchemaKey>();

export function schemaKeyOf(schema: Schema): SchemaKey {
  let key = cache.get(schema);
  if (key === undefined) {
    const canonical = JSON.stringify(schema.fields.map(describeField));
    key = createHash('sha256').update(canonical).digest('hex').slice(0, 16) as SchemaKey;
    cache.set(schema, key);
  }
  return key;
}

type FieldDescription = [string, string, boolean, FieldDescription[]];

function describeField(field: Field): FieldDescription {
  // Every concrete DataType names itself (with parameters) in toString(); the base class does not declare it.
  const type = field.type as DataType & { toString(): string };
  const children = (type.children as readonly Field[] | null | undefined) ?? [];
  return [field.name, type.toString(), field.nullable, children.map(describeField)];
}
