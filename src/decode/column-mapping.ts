import type { DeclaredField } from '../config';

/**
 * What the registry formats' schema mappings (avro/, protobuf/) share: a schema's
 * field mapped to a column type, with how its decoded value becomes the column's.
 */
export type ToValue = (value: unknown) => unknown;

export interface Mapped {
  readonly field: DeclaredField;
  readonly toValue: ToValue;
}

export const identity: ToValue = (v) => v;

/** The struct column of a record or message whose fields are mapped one by one. */
export function structField(
  fields: readonly { readonly name: string; readonly mapped: Mapped }[],
  nullable: boolean,
): DeclaredField {
  return { type: 'struct', fields: fields.map(({ name, mapped }) => ({ name, ...mapped.field })), nullable };
}

/**
 * A map: a list of {key, value} structs, in the map's order (the registry formats'
 * maps, Avro's with string keys, Protobuf's with scalar ones).
 */
export function mapEntries(key: Mapped, value: Mapped): Mapped {
  return {
    field: {
      type: 'list',
      items: {
        type: 'struct',
        fields: [
          { name: 'key', ...key.field },
          { name: 'value', ...value.field },
        ],
        nullable: false,
      },
      nullable: false,
    },
    toValue: (v) =>
      Object.entries((v ?? {}) as Record<string, unknown>).map(([k, x]) => ({
        key: key.toValue(k),
        value: value.toValue(x),
      })),
  };
}
