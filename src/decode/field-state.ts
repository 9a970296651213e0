import type { DeclaredField, EpochUnit, NamedField } from '../config';
import {
  FIELD_CODECS,
  INVALID,
  type Converted,
  type FieldCodec,
  type Invalid,
  type InferredTypeName,
} from './field-codec';
import { codecOf, numbersUnit, typeLabel } from './typed-codecs';

/** A data column as the decoder knows it: its name, type and how values convert into it. */
export interface FieldState {
  readonly name: string;
  /** The type as messages name it (`int32`, `vector<float32>[768]`). */
  readonly label: string;
  /** Resolved once per field: the hot path calls it without a lookup by type name. */
  readonly codec: FieldCodec;
  readonly nullable: boolean;
  /** Of numeric timestamps: the field's own unit, else its stored unit, else the consumer's. */
  readonly epochUnit: EpochUnit;
}

/** A declared column (the consumer's schema, or a registry writer schema's field). */
export function declaredField(field: NamedField, consumerUnit: EpochUnit): FieldState {
  return {
    name: field.name,
    label: typeLabel(field),
    codec: codecOf(field, consumerUnit),
    nullable: field.nullable,
    epochUnit: numbersUnit(field, consumerUnit),
  };
}

/** What a registry writer schema changes in the decoder's columns. */
export interface WriterFieldChanges {
  /** Columns the decoder does not have yet (new nullable columns). */
  readonly added: FieldState[];
  /** Each added or retyped column's type as the writer declared it (JSON). */
  readonly types: (readonly [string, string])[];
  /** Columns the writer gives another type, each with its new type's JSON. */
  readonly retyped: (readonly [FieldState, string])[];
}

/**
 * Registry formats: the columns a writer schema has that the decoder does not have yet,
 * and the columns it gives another type than the decoder's (`writerTypes`: each column's
 * type as the latest writer schema that named it declared it): Lance cannot change a
 * column's type, so the caller starts a new segment in which the column has the writer's type.
 */
export function writerFieldChanges(
  fields: readonly NamedField[],
  writerTypes: ReadonlyMap<string, string>,
  consumerUnit: EpochUnit,
): WriterFieldChanges {
  const added: FieldState[] = [];
  const types: (readonly [string, string])[] = [];
  const retyped: (readonly [FieldState, string])[] = [];
  for (const f of fields) {
    const type = JSON.stringify(f);
    const known = writerTypes.get(f.name);
    if (known === type) continue;
    const state = declaredField(f, consumerUnit);
    if (known === undefined) {
      types.push([f.name, type]);
      added.push(state);
    } else {
      retyped.push([state, type]);
    }
  }
  return { added, types, retyped };
}

/** How many fields a column is, nested ones included (a struct counts itself and each of its fields). */
export function nestedFieldCount(field: DeclaredField): number {
  switch (field.type) {
    case 'struct':
      return field.fields.reduce((n, f) => n + nestedFieldCount(f), 1);
    case 'list':
      return nestedFieldCount(field.items);
    default:
      return 1;
  }
}

/** A column `schema: 'infer'` created from a value's JSON kind. */
export function inferredField(name: string, type: InferredTypeName, epochUnit: EpochUnit): FieldState {
  return { name, label: type, codec: FIELD_CODECS[type], nullable: true, epochUnit };
}

/** A key for a dead-letter detail: escaped (a lone surrogate stays visible), and short. */
export function quoted(name: string): string {
  return JSON.stringify(name.length > 200 ? `${name.slice(0, 200)}…` : name);
}

export function convertValue(field: FieldState, value: unknown): Converted | Invalid {
  if (value === null || value === undefined) return field.nullable ? null : INVALID;
  return field.codec.convert(value, field.epochUnit);
}

export function mismatch(field: FieldState, value: unknown, invalid: Invalid): string {
  const kind =
    value === null || value === undefined
      ? 'null'
      : Array.isArray(value)
        ? 'array'
        : typeof value === 'bigint'
          ? 'number'
          : typeof value;
  const head = `field "${field.name}": expected ${field.label}${field.nullable ? '' : ' (required)'}`;
  return invalid.why === undefined ? `${head}, got ${kind}` : `${head}: ${invalid.why}`;
}
