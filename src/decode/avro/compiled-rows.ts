import type { BatchColumns } from '../batch-columns';
import type { ColumnBuilder } from '../column-builder';
import type { FieldState } from '../field-state';
import type { WriterSchemas } from '../registry-writer-schemas';
import type { CompiledAvroReader } from './compiled-reader';

/** Where a writer's fields go among the decoder's columns, for one list of columns. */
interface Plan {
  readonly reader: CompiledAvroReader;
  /** The decoder's columns the plan was made for (compared by identity). */
  readonly columns: readonly FieldState[];
  /** Each writer field's column index; undefined when the plan is unusable. */
  readonly targets: readonly number[] | undefined;
  /** Columns the writer does not have: null in its rows. */
  readonly absent: readonly number[];
  /** The builders of `targets` in the last BatchColumns appended to. */
  batch?: BatchColumns;
  builders?: ColumnBuilder[];
}

/** A record a compiled reader has checked, ready to append. */
export interface CompiledRow {
  append(columns: BatchColumns): void;
}

/**
 * The record decoder's use of the writer schemas' compiled readers. A record takes the
 * compiled path only when its writer schema is admitted (every field already a column of the
 * writer's type, so the reference path would add or retype nothing) and its reader says it
 * reads the record exactly; then the row the reference path would make — the writer's fields,
 * null in the decoder's other columns — is written straight into the builders.
 */
export class CompiledRows {
  readonly #plans = new Map<number, Plan>();

  constructor(private readonly schemas: WriterSchemas) {}

  reader(
    value: Uint8Array,
    columns: readonly FieldState[],
    admitted: ReadonlySet<string>,
    writerTypes: ReadonlyMap<string, string>,
  ): CompiledRow | undefined {
    const found = this.schemas.compiledReader(value);
    if (!found || !admitted.has(String(found.schemaId))) return undefined;
    let plan = this.#plans.get(found.schemaId);
    if (!plan || plan.reader !== found.reader || !sameColumns(plan.columns, columns)) {
      plan = planOf(found.reader, columns, writerTypes);
      this.#plans.set(found.schemaId, plan);
    }
    const targets = plan.targets;
    if (!targets) return undefined;
    const buf = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    if (!found.reader.check(buf)) return undefined;
    const ready = plan;
    return {
      append(batch) {
        if (ready.batch !== batch) {
          ready.batch = batch;
          ready.builders = targets.map((i) => batch.dataBuilder(i));
        }
        ready.reader.append(buf, ready.builders!);
        for (const i of ready.absent) batch.dataBuilder(i).appendNull();
      },
    };
  }
}

function sameColumns(a: readonly FieldState[], b: readonly FieldState[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function planOf(
  reader: CompiledAvroReader,
  columns: readonly FieldState[],
  writerTypes: ReadonlyMap<string, string>,
): Plan {
  const unusable = { reader, columns: [...columns], targets: undefined, absent: [] };
  const targets: number[] = [];
  for (const { name, field } of reader.fields) {
    const at = columns.findIndex((c) => c.name === name);
    // The column must be the one this writer's declaration made (record-decoder's writerTypes).
    if (at < 0 || writerTypes.get(name) !== JSON.stringify(field)) return unusable;
    targets.push(at);
  }
  const absent: number[] = [];
  for (let i = 0; i < columns.length; i++) {
    if (targets.includes(i)) continue;
    if (!columns[i]!.nullable) return unusable;
    absent.push(i);
  }
  return { reader, columns: [...columns], targets, absent };
}
