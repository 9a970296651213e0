import type { EpochUnit, ResolvedField } from '../config';
import { KafkaLanceError } from '../common/errors';
import { declaredTypeChanges } from './declared-schema';
import { readTableSchema } from './known-fields';
import type { SharedConnections } from './connect';
import type { LanceTarget } from './lance-table';
import { ROW_KEY_COLUMNS, primaryKeyOf } from './table-schema';

/** What the definition expects of every table it writes: declared fields, and its mode's key. */
export interface TableExpectations {
  /** Declared fields (undefined: the schema is inferred, nothing to compare). */
  readonly fields: readonly ResolvedField[] | undefined;
  readonly epochUnit: EpochUnit;
  /** Upsert mode's key columns; undefined in append mode. */
  readonly upsertKey: readonly string[] | undefined;
}

/** One thing an existing table refuses: the definition's field (its option path) and why. */
export interface TableProblem {
  readonly field: string;
  readonly message: string;
}

/**
 * An existing table the definition cannot write into (a declared field whose column has
 * another type, an append table for an upsert definition or the reverse): only this
 * table's publications wait; the other tables of the replica go on.
 */
export class TableRefusedError extends KafkaLanceError {
  constructor(
    readonly table: string,
    readonly problems: readonly TableProblem[],
  ) {
    super('TABLE_REFUSED', `table ${table}: ${problems.map((p) => `${p.field}: ${p.message}`).join('; ')}`, {
      context: { table, fields: problems.map((p) => p.field) },
    });
  }
}

/**
 * The checks the start makes for the fixed table (startup-checks.ts, `checkDeclaredTypes`
 * and `checkTableMode`), made for any table when the materializer first opens it: a table
 * created by another definition, or by an earlier one of this, is found out before a plan
 * of its parts is written, naming the field. A table that does not exist yet passes (its
 * first publication creates it); a store that cannot be read throws (retried by the caller).
 */
export async function tableOpeningProblems(
  target: LanceTarget,
  expect: TableExpectations,
  connections?: SharedConnections,
): Promise<TableProblem[]> {
  const schema = await readTableSchema(target, connections);
  if (!schema) return [];
  const problems: TableProblem[] = [];
  if (expect.fields !== undefined) {
    for (const c of declaredTypeChanges(expect.fields, schema, target.table, expect.epochUnit))
      problems.push({ field: `schema.fields.${c.field}`, message: c.message });
  }
  const key = primaryKeyOf(schema);
  // An append table's key is the row key (or none, when created before keys were set).
  const upsertTable = key.some((c) => !ROW_KEY_COLUMNS.includes(c));
  const want = expect.upsertKey;
  if (want && key.join(',') !== want.join(',')) {
    problems.push({
      field: 'key',
      message: `table ${target.table} is keyed on (${key.join(', ')}), not (${want.join(', ')}): ${upsertTable ? 'it is an upsert table with another key' : 'it was created in append mode'}; upsert into a new table`,
    });
  } else if (!want && upsertTable) {
    problems.push({
      field: 'mode',
      message: `table ${target.table} is an upsert table keyed on (${key.join(', ')}): appending would hold its keys twice; set mode: "upsert" with its key`,
    });
  }
  return problems;
}

/** Throws TableRefusedError when the existing table refuses the definition (tableOpeningProblems). */
export async function checkTableOpening(
  target: LanceTarget,
  expect: TableExpectations,
  connections?: SharedConnections,
): Promise<void> {
  const problems = await tableOpeningProblems(target, expect, connections);
  if (problems.length > 0) throw new TableRefusedError(target.table, problems);
}
