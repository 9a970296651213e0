import { z } from 'zod';
import { columnNameProblem } from './column-name';

/**
 * How a definition declares one column (`schema.fields.<name>`): the type names, the
 * parameterized types, and the zod schema that checks a declaration and fills in its
 * defaults. src/config/resolve.ts normalizes what it gives back into DeclaredField.
 */

/**
 * Column types a definition can declare by name; JSON values are converted into them
 * (src/decode/typed-codecs.ts says what each accepts). The first seven are also what
 * inference produces; the others are declared only.
 */
export const FIELD_TYPES = [
  'string',
  'int32',
  'int64',
  'float64',
  'boolean',
  'timestamp',
  'json',
  'float32',
  'int8',
  'int16',
  'uint8',
  'uint16',
  'uint32',
  'uint64',
  'date',
  'binary',
  'large_string',
  'large_binary',
] as const;
export type FieldTypeName = (typeof FIELD_TYPES)[number];

/** Types with parameters, declared as objects (`{ type: 'vector', dim: 768 }`). */
export const COMPOSITE_TYPES = ['vector', 'decimal', 'list', 'struct'] as const;
export type CompositeTypeName = (typeof COMPOSITE_TYPES)[number];

/**
 * Vector elements LanceDB 0.39 can search (measured: a nearest-neighbour query on a
 * FixedSizeList of each). Int8 is stored by Lance but refused by every query ("element
 * type Int8 and the query vector is Float32"), so it is not offered.
 */
export const VECTOR_ELEMENTS = ['float32', 'float16', 'uint8'] as const;
export type VectorElement = (typeof VECTOR_ELEMENTS)[number];
/** Lance's limit on a vector's dimension is far above this; a bound keeps a typo from allocating gigabytes. */
export const MAX_VECTOR_DIM = 65_536;
/** Decimal128: Arrow's and Lance's common decimal. */
export const MAX_DECIMAL_PRECISION = 38;

/** Units of numeric (epoch) timestamps, and of stored timestamps. */
export const EPOCH_UNITS = ['s', 'ms', 'us', 'ns'] as const;
export type EpochUnit = (typeof EPOCH_UNITS)[number];

/**
 * A declared column type, normalized (a bare type name is `{ type }`). Written out by
 * hand because list items and struct fields nest it: zod cannot infer a recursive
 * schema's type, so `fieldSpec` below is checked against these.
 */
export type DeclaredType =
  | { readonly type: Exclude<FieldTypeName, 'timestamp'> }
  | {
      readonly type: 'timestamp';
      /** The stored unit (Arrow Timestamp unit); ms when absent. */
      readonly unit?: EpochUnit;
      /** The stored zone (Arrow Timestamp timezone): metadata only, values are UTC instants. */
      readonly timezone?: string;
      /** The unit of this field's numbers: its `unit` when declared, else the consumer's `epochUnit`. */
      readonly epochUnit?: EpochUnit;
    }
  | { readonly type: 'vector'; readonly dim: number; readonly element: VectorElement }
  | { readonly type: 'decimal'; readonly precision: number; readonly scale: number }
  | { readonly type: 'list'; readonly items: DeclaredField }
  | { readonly type: 'struct'; readonly fields: readonly NamedField[] };
export type DeclaredField = DeclaredType & { readonly nullable: boolean };
export type NamedField = DeclaredField & { readonly name: string };

/** What a definition may write for one field (zod input). */
export type FieldSpecInput =
  | FieldTypeName
  | {
      type: FieldTypeName;
      nullable?: boolean;
      epochUnit?: EpochUnit;
      unit?: EpochUnit;
      timezone?: string;
    }
  | { type: 'vector'; dim: number; element?: VectorElement; nullable?: boolean }
  | { type: 'decimal'; precision: number; scale?: number; nullable?: boolean }
  | { type: 'list'; items: FieldSpecInput; nullable?: boolean }
  | { type: 'struct'; fields: Record<string, FieldSpecInput>; nullable?: boolean };

/** What the schema gives back for one field (zod output): defaults applied, not yet normalized. */
export type FieldSpecOutput =
  | FieldTypeName
  | {
      type: FieldTypeName;
      nullable: boolean;
      epochUnit?: EpochUnit | undefined;
      unit?: EpochUnit | undefined;
      timezone?: string | undefined;
    }
  | { type: 'vector'; dim: number; element: VectorElement; nullable: boolean }
  | { type: 'decimal'; precision: number; scale: number; nullable: boolean }
  | { type: 'list'; items: FieldSpecOutput; nullable: boolean }
  | { type: 'struct'; fields: Record<string, FieldSpecOutput>; nullable: boolean };

const fieldType = z.enum(FIELD_TYPES);
export const epochUnit = z.enum(EPOCH_UNITS);
export const nullable = z.boolean().default(true);
const scalarSpec = z
  .strictObject({
    type: fieldType,
    nullable,
    /** The unit of this timestamp field's numbers; its `unit`, else the consumer's `epochUnit`, when absent. */
    epochUnit: epochUnit.optional(),
    /** The stored unit of a timestamp column (ms when absent). */
    unit: epochUnit.optional(),
    /** The stored zone of a timestamp column (an IANA name or ±hh:mm). */
    timezone: z
      .string()
      .min(1)
      .refine(isTimeZone, 'not a time zone: an IANA name (Europe/Paris, UTC) or an offset (+02:00)')
      .optional(),
  })
  .superRefine((spec, ctx) => {
    if (spec.type === 'timestamp') return;
    for (const key of ['epochUnit', 'unit', 'timezone'] as const) {
      if (spec[key] !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: [key],
          message: `only a timestamp field has ${key === 'epochUnit' ? 'an epoch unit' : `a ${key}`}`,
        });
    }
  });
const vectorSpec = z.strictObject({
  type: z.literal('vector'),
  dim: z.number().int().min(1).max(MAX_VECTOR_DIM),
  element: z
    .enum(VECTOR_ELEMENTS, {
      error: `one of ${VECTOR_ELEMENTS.join(', ')} (LanceDB 0.39 stores int8 vectors but no query can search them)`,
    })
    .default('float32'),
  nullable,
});
const decimalSpec = z
  .strictObject({
    type: z.literal('decimal'),
    precision: z.number().int().min(1).max(MAX_DECIMAL_PRECISION),
    scale: z.number().int().min(0).max(MAX_DECIMAL_PRECISION).default(0),
    nullable,
  })
  .superRefine((spec, ctx) => {
    if (spec.scale > spec.precision)
      ctx.addIssue({
        code: 'custom',
        path: ['scale'],
        message: `a scale above the precision (${spec.precision}) leaves no integer digits`,
      });
  });
const listSpec = z.strictObject({
  type: z.literal('list'),
  get items(): z.ZodType<FieldSpecOutput, FieldSpecInput> {
    return fieldSpec;
  },
  nullable,
});
const structSpec = z.strictObject({
  type: z.literal('struct'),
  get fields(): z.ZodType<Record<string, FieldSpecOutput>, Record<string, FieldSpecInput>> {
    return z.record(z.string().min(1), fieldSpec).superRefine((fields, ctx) => {
      for (const name of Object.keys(fields)) {
        const problem = columnNameProblem(name);
        if (problem !== undefined) ctx.addIssue({ code: 'custom', path: [name], message: problem });
      }
    });
  },
  nullable,
});
/** One field's declaration (exported for the README's types table, which parses its examples with it). */
export const fieldSpec: z.ZodType<FieldSpecOutput, FieldSpecInput> = z.union([
  fieldType,
  z.discriminatedUnion('type', [scalarSpec, vectorSpec, decimalSpec, listSpec, structSpec]),
]);

/** An IANA zone Intl knows, or a fixed offset: what Arrow readers accept as a timestamp's timezone. */
function isTimeZone(zone: string): boolean {
  if (/^[+-](?:[01]\d|2[0-3]):[0-5]\d$/.test(zone)) return true;
  try {
    new Intl.DateTimeFormat('en', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}
