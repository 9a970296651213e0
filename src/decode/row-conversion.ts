import type { EpochUnit, Row } from '../config';
import { columnNameProblem } from '../config/column-name';
import type { DeadLetterVerdict } from '../dead-letters/dead-letter-reason';
import { Invalid, inferFieldType, type Converted } from './field-codec';
import { convertValue, inferredField, mismatch, quoted, type FieldState } from './field-state';

/** The decoder's columns when a record arrives. */
export interface ColumnsSoFar {
  readonly fields: readonly FieldState[];
  readonly byName: ReadonlyMap<string, FieldState>;
  /**
   * `schema: 'infer'`: keys that are no column yet become columns of the type their
   * value shows (record-decoder.ts states the rules). Undefined: they are ignored.
   */
  readonly infer: { readonly maxInferredColumns: number; readonly epochUnit: EpochUnit } | undefined;
}

/** One record's rows, each a value per column, and the columns it adds (in order). */
export interface ConvertedRows {
  readonly values: Converted[][];
  readonly newFields: FieldState[];
}

/**
 * Converts every row of one record, or returns why it cannot be staged. `pending`: the
 * columns its writer schema adds (registry formats), converted after the known ones.
 */
export function convertRows(
  rows: readonly Row[],
  pending: readonly FieldState[],
  columns: ColumnsSoFar,
): ConvertedRows | Omit<DeadLetterVerdict, 'offset'> {
  const { fields, byName, infer } = columns;
  // The field at fault goes with the verdict: a stop report names the most common one.
  const schemaMismatch = (field: string, detail: string) => ({
    reason: 'schema-mismatch' as const,
    detail,
    field,
  });
  const newFields: FieldState[] = [...pending];
  const values: Converted[][] = [];
  for (const row of rows) {
    const out: Converted[] = [];
    for (const field of pending.length === 0 ? fields : [...fields, ...pending]) {
      const result = convertValue(field, row[field.name]);
      if (result instanceof Invalid)
        return schemaMismatch(field.name, mismatch(field, row[field.name], result));
      out.push(result);
    }
    if (infer) {
      for (const [name, v] of Object.entries(row)) {
        if (byName.has(name)) continue;
        // Checked before the null test: whether a bad key is refused must not depend on its value.
        const problem = columnNameProblem(name);
        if (problem !== undefined) return schemaMismatch(name, `key ${quoted(name)}: ${problem}`);
        let field = newFields.find((f) => f.name === name);
        if (!field) {
          const type = inferFieldType(v);
          if (type === undefined) continue; // null: the column is created once a value shows its type
          const max = infer.maxInferredColumns;
          if (fields.length + newFields.length >= max) {
            return {
              reason: 'too-many-columns',
              detail:
                `key ${quoted(name)} would be column ${fields.length + newFields.length + 1}, ` +
                `beyond maxInferredColumns ${max}: keep map-like objects under one key (a json column) ` +
                'or declare a json field',
            };
          }
          field = inferredField(name, type, infer.epochUnit);
          newFields.push(field);
        }
        const result = convertValue(field, v);
        if (result instanceof Invalid) return schemaMismatch(field.name, mismatch(field, v, result));
      }
      // Values of columns first seen in this record, in their order (filled per row below).
      for (const field of newFields) {
        const result = convertValue(field, row[field.name]);
        if (result instanceof Invalid)
          return schemaMismatch(field.name, mismatch(field, row[field.name], result));
        out.push(result);
      }
    }
    values.push(out);
  }
  // Rows converted before a later row added a column lack its value: pad with nulls.
  const width = fields.length + newFields.length;
  for (const v of values) while (v.length < width) v.push(null);
  return { values, newFields };
}
