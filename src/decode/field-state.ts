import type { EpochUnit } from '../config';
import {
  FIELD_CODECS,
  INVALID,
  type Converted,
  type FieldCodec,
  type Invalid,
  type InferredTypeName,
} from './field-codec';

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
