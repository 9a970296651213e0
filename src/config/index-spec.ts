import { z } from 'zod';
import type { FieldSpecOutput } from './field-spec';

/**
 * Declared Lance indexes (`indexes: [...]` in a consumer definition): which column, which
 * LanceDB index, its training options. The replica that compacts builds them once the
 * table can train them and keeps them fresh (src/lance/index-keeper.ts); this module only
 * says what may be declared, and checks each index against the declared column it names.
 */

export const VECTOR_INDEX_TYPES = ['ivf_pq', 'ivf_hnsw_sq', 'ivf_flat'] as const;
export const SCALAR_INDEX_TYPES = ['btree', 'bitmap', 'label_list', 'fts'] as const;
export type VectorIndexType = (typeof VECTOR_INDEX_TYPES)[number];
export type ScalarIndexType = (typeof SCALAR_INDEX_TYPES)[number];
export const DISTANCE_METRICS = ['l2', 'cosine', 'dot'] as const;
export type DistanceMetric = (typeof DISTANCE_METRICS)[number];

/**
 * The fewest rows a vector index trains on when the definition names no `minRows`:
 * PQ's codebooks have 256 centroids per sub-vector (LanceDB refuses fewer rows), and
 * k-means wants a few hundred vectors per IVF partition (LanceDB samples 256 per
 * partition), so `256 × numPartitions` when the partitions are declared, else 4,096
 * (LanceDB then picks about √rows partitions: 64 at that size).
 */
export const VECTOR_TRAINING_ROWS_PER_PARTITION = 256;
export const DEFAULT_VECTOR_MIN_ROWS = 4_096;
/**
 * A vector index is trained again (createIndex with replace) once more than this share of
 * its rows came after its last training: LanceDB's optimize assigns new rows to the
 * partitions and codebooks trained on the old ones, which drift as the data does. 0.5 =
 * every time the table doubles, so retraining costs O(rows) in total.
 */
export const DEFAULT_RETRAIN_SHARE = 0.5;

const column = z.string().min(1);
const name = z
  .string()
  .regex(/^[A-Za-z][A-Za-z0-9_]{0,127}$/, 'letters, digits and "_", starting with a letter')
  .optional();
const metric = z.enum(DISTANCE_METRICS).default('l2');
const numPartitions = z.number().int().min(1).max(65_536).optional();
const minRows = z.number().int().min(1).optional();
const retrainShare = z.number().gt(0).max(1).default(DEFAULT_RETRAIN_SHARE);

const ivfPq = z.strictObject({
  column,
  type: z.literal('ivf_pq'),
  name,
  metric,
  numPartitions,
  numSubVectors: z.number().int().min(1).optional(),
  numBits: z.union([z.literal(4), z.literal(8)]).optional(),
  minRows,
  retrainShare,
});
const ivfHnswSq = z.strictObject({
  column,
  type: z.literal('ivf_hnsw_sq'),
  name,
  metric,
  numPartitions,
  m: z.number().int().min(2).max(256).optional(),
  efConstruction: z.number().int().min(1).max(10_000).optional(),
  minRows,
  retrainShare,
});
const ivfFlat = z.strictObject({
  column,
  type: z.literal('ivf_flat'),
  name,
  metric,
  numPartitions,
  minRows,
  retrainShare,
});
const scalar = z.strictObject({ column, type: z.enum(SCALAR_INDEX_TYPES), name });

/** One declared index (zod); the options table walks it as `indexes[].<option>`. */
export const indexSpec = z.discriminatedUnion('type', [ivfPq, ivfHnswSq, ivfFlat, scalar]);
export type IndexSpec = z.output<typeof indexSpec>;
export type VectorIndexSpec = Extract<IndexSpec, { type: VectorIndexType }>;

export function isVectorIndex(spec: IndexSpec): spec is VectorIndexSpec {
  return (VECTOR_INDEX_TYPES as readonly string[]).includes(spec.type);
}

/** The index's name in Lance: declared, else LanceDB's own default (`<column>_idx`). */
export function indexName(spec: IndexSpec): string {
  return spec.name ?? `${spec.column}_idx`;
}

/** Rows the table holds (non-null in the column) before a vector index is trained. */
export function vectorMinRows(spec: VectorIndexSpec): number {
  if (spec.minRows !== undefined) return spec.minRows;
  return spec.numPartitions !== undefined
    ? VECTOR_TRAINING_ROWS_PER_PARTITION * spec.numPartitions
    : DEFAULT_VECTOR_MIN_ROWS;
}

export interface IndexProblem {
  /** Path below `indexes`. */
  readonly path: readonly (string | number)[];
  readonly message: string;
}

const STRING_TYPES = ['string', 'large_string'];
const INTEGER_TYPES = ['int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64'];

/** The declared types each scalar index takes (the order is the one the error message lists). */
const SCALAR_COLUMN_TYPES: Readonly<Record<ScalarIndexType, readonly string[]>> = {
  btree: [...STRING_TYPES, ...INTEGER_TYPES, 'float32', 'float64', 'timestamp', 'date', 'boolean', 'decimal'],
  bitmap: [...STRING_TYPES, ...INTEGER_TYPES, 'boolean', 'date'],
  label_list: ['list'],
  fts: STRING_TYPES,
};

const typeOf = (spec: FieldSpecOutput) => (typeof spec === 'string' ? { type: spec } : spec);

/**
 * Each index against the columns the definition declares (an inferred schema has no
 * vectors and no types to check, so indexes need declared columns): a vector index on a
 * float vector (PQ's sub-vectors dividing its dimension), a scalar index on a column of a
 * type it can index, one index per column.
 */
export function indexProblems(
  indexes: readonly IndexSpec[],
  fields: Readonly<Record<string, FieldSpecOutput>> | undefined,
): IndexProblem[] {
  const problems: IndexProblem[] = [];
  const seen = new Map<string, number>();
  indexes.forEach((spec, i) => {
    const at = (key: string, message: string) => problems.push({ path: [i, key], message });
    if (!fields) {
      at('column', 'indexes need declared columns: schema is "infer"');
      return;
    }
    const declared = fields[spec.column];
    if (!declared) {
      at(
        'column',
        `"${spec.column}" is not a declared field (declared: ${Object.keys(fields).join(', ') || 'none'})`,
      );
      return;
    }
    const first = seen.get(spec.column);
    if (first !== undefined) at('column', `"${spec.column}" already has an index (indexes.${first})`);
    seen.set(spec.column, i);
    const field = typeOf(declared);
    if (isVectorIndex(spec)) {
      if (field.type !== 'vector') {
        at('type', `a ${spec.type} index needs a vector column; "${spec.column}" is ${field.type}`);
        return;
      }
      if (field.type === 'vector' && field.element === 'uint8')
        at('type', `a ${spec.type} index needs float32 or float16 vectors; "${spec.column}" has uint8`);
      if (spec.type === 'ivf_pq' && spec.numSubVectors !== undefined && field.dim % spec.numSubVectors !== 0)
        at(
          'numSubVectors',
          `${spec.numSubVectors} does not divide the dimension of "${spec.column}" (${field.dim})`,
        );
    } else {
      const allowed = SCALAR_COLUMN_TYPES[spec.type];
      if (!allowed.includes(field.type))
        at(
          'type',
          `a ${spec.type} index takes ${allowed.join(', ')} columns; "${spec.column}" is ${field.type}`,
        );
    }
  });
  return problems;
}
