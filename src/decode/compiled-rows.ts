import type { Data } from 'apache-arrow';
import type { BatchColumns } from './batch-columns';
import type { ColumnBuilder } from './column-builder';
import type { CompiledReader } from './compiled-reader';
import type { FieldState } from './field-state';
import type { NativeBatchReader } from './native-dispatch';
import { NativeRegistryColumns } from './native-registry-columns';
import type { RawMessage } from './raw-message';
import type { WriterSchemas } from './registry-writer-schemas';
import { HEADER_BYTES } from '../schema-registry/wire-format';

/** Where a writer's fields go among the decoder's columns, for one list of columns. */
interface Plan {
  readonly reader: CompiledReader;
  /** The decoder's columns the plan was made for (compared by identity). */
  readonly columns: readonly FieldState[];
  /** Each writer field's column index; undefined when the plan is unusable. */
  readonly targets: readonly number[] | undefined;
  /** Columns the writer does not have: null in its rows. */
  readonly absent: readonly number[];
  /** The builders of `targets` in the last BatchColumns appended to. */
  batch?: BatchColumns;
  builders?: ColumnBuilder[];
  /** The native reader of the targets' columns: null when there is none (made at first use). */
  native?: NativeRegistryColumns | null;
}

/**
 * The record decoder's use of the writer schemas' compiled readers. A record takes the
 * compiled path only when its writer schema is admitted (every field already a column of the
 * writer's type, so the reference path would add or retype nothing) and its reader says it
 * reads the record exactly; then the row the reference path would make — the writer's fields,
 * null in the decoder's other columns — is written straight into the builders.
 *
 * Nothing is allocated per record: a value is read where it lies, in a Buffer over its whole
 * batch (one per batch), and the plan `check` returns is the writer's own.
 */
export class CompiledRows {
  /** By writer: the schema id, and the message-index path where a schema has several types. */
  readonly #plans = new Map<string, Plan>();
  /** A Buffer over the ArrayBuffer the last values lay in (their batch's). */
  #whole: Buffer | undefined;

  constructor(private readonly schemas: WriterSchemas) {}

  /** The plan of a value whose writer is admitted and whose reader reads it exactly, else undefined. */
  check(
    value: Uint8Array,
    columns: readonly FieldState[],
    admitted: ReadonlySet<string>,
    writerTypes: ReadonlyMap<string, string>,
  ): CompiledPlan | undefined {
    const found = this.schemas.compiledReader(value);
    if (!found || !admitted.has(found.writer)) return undefined;
    let plan = this.#plans.get(found.writer);
    if (!plan || plan.reader !== found.reader || !sameColumns(plan.columns, columns)) {
      plan = planOf(found.reader, columns, writerTypes);
      this.#plans.set(found.writer, plan);
    }
    if (!plan.targets) return undefined;
    const start = value.byteOffset;
    return found.reader.check(this.#bufferOf(value), start, start + value.byteLength) ? plan : undefined;
  }

  /**
   * A reader of a whole batch's values at once (a native reader), when every one of
   * `values` is framed by the same admitted writer whose plan is usable and whose reader has
   * a native twin; else undefined, having decided nothing. Its columns are the decoder's
   * `columns`, null in those the writer does not have, as `append` would write them.
   */
  nativeReader(
    values: readonly RawMessage[],
    columns: readonly FieldState[],
    admitted: ReadonlySet<string>,
    writerTypes: ReadonlyMap<string, string>,
  ): NativeBatchReader | undefined {
    if (values.length === 0) return undefined;
    const first = values[0]!.value!;
    const found = this.schemas.compiledReader(first);
    const program = found?.reader.native;
    if (!found || !program || !admitted.has(found.writer)) return undefined;
    // The writer is the schema id, and for Protobuf the message-index list: the same bytes in
    // every value, compared rather than each value's list parsed (a list written another way
    // than the program's leaves the batch to the compiled reader).
    const prefix = program.format === 'protobuf' ? program.prefix : [];
    const framing = HEADER_BYTES + prefix.length;
    if (first.byteLength < framing || prefix.some((b, i) => first[HEADER_BYTES + i] !== b)) return undefined;
    for (let v = 1; v < values.length; v++) {
      const value = values[v]!.value!;
      if (value.byteLength < framing) return undefined;
      for (let i = 0; i < framing; i++) if (value[i] !== first[i]) return undefined;
    }
    let plan = this.#plans.get(found.writer);
    if (!plan || plan.reader !== found.reader || !sameColumns(plan.columns, columns)) {
      plan = planOf(found.reader, columns, writerTypes);
      this.#plans.set(found.writer, plan);
    }
    const targets = plan.targets;
    if (!targets) return undefined;
    if (plan.native === undefined) {
      try {
        plan.native =
          NativeRegistryColumns.for(
            found.reader.native,
            targets.map((i) => columns[i]!.codec.arrowType()),
          ) ?? null;
      } catch {
        plan.native = null; // a program the native module refuses: the compiled reader reads the writer
      }
    }
    const native = plan.native;
    if (!native) return undefined;
    const absent = plan.absent;
    return {
      decode(messages) {
        const decoded = native.decode(messages);
        const children: Data[] = [];
        targets.forEach((column, k) => (children[column] = decoded.children[k]!));
        // The columns the writer does not have (planOf: nullable): null in its rows, as `append` writes them.
        for (const i of absent) {
          const nulls = columns[i]!.codec.builder();
          for (let row = 0; row < decoded.rows; row++) nulls.appendNull();
          children[i] = nulls.finish();
        }
        return { rows: decoded.rows, rejected: decoded.rejected, children };
      },
    };
  }

  /** Appends a value `check` gave `plan` for. */
  append(plan: CompiledPlan, value: Uint8Array, batch: BatchColumns): void {
    const ready = plan as Plan;
    if (ready.batch !== batch) {
      ready.batch = batch;
      ready.builders = ready.targets!.map((i) => batch.dataBuilder(i));
    }
    const start = value.byteOffset;
    ready.reader.append(this.#bufferOf(value), start, start + value.byteLength, ready.builders!);
    for (const i of ready.absent) batch.dataBuilder(i).appendNull();
  }

  #bufferOf(value: Uint8Array): Buffer {
    const whole = this.#whole;
    if (whole?.buffer === value.buffer) return whole;
    return (this.#whole = Buffer.from(value.buffer));
  }
}

/** A writer's plan, as `check` hands it to `append`. */
export type CompiledPlan = object;

function sameColumns(a: readonly FieldState[], b: readonly FieldState[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function planOf(
  reader: CompiledReader,
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
