import type { Schema } from 'apache-arrow';
import type { EpochUnit, ResolvedField } from '../config';
import { arrowFieldOf, typeLabel } from '../decode/typed-codecs';
import { sameColumnType } from './table-schema';

/** A declared field whose column already exists in the table with another type. */
export interface DeclaredTypeChange {
  readonly field: string;
  readonly declared: string;
  readonly table: string;
  readonly message: string;
}

/**
 * The declared fields an existing table cannot take, checked at start: Lance cannot
 * change a column's type in place, so a definition whose field changed type would
 * stage parts that every publication then refuses (and sets aside). Refusing at start
 * names the field and both types before one record is consumed. A field the table
 * lacks is no change: the first publication adds it as a new nullable column.
 */
export function declaredTypeChanges(
  fields: readonly ResolvedField[],
  table: Schema,
  tableName: string,
  consumerUnit: EpochUnit,
): DeclaredTypeChange[] {
  const columns = new Map(table.fields.map((f) => [f.name, f]));
  return fields.flatMap((declared) => {
    const column = columns.get(declared.name);
    if (!column) return [];
    const staged = arrowFieldOf(declared.name, declared, consumerUnit);
    if (sameColumnType(column, staged)) return [];
    const was = String(column.type);
    const now = String(staged.type);
    return [
      {
        field: declared.name,
        declared: now,
        table: was,
        message: `declared ${typeLabel(declared)} (Arrow ${now}), but column "${declared.name}" of Lance table ${tableName} is ${was}: a column's type cannot change in place; declare it as ${was}, or use a new field name (a new nullable column) or a new table`,
      },
    ];
  });
}
