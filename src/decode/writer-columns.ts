import type { EpochUnit, NamedField } from '../config';
import type { DeadLetterVerdict } from '../dead-letters/dead-letter-reason';
import type { WriterColumns } from './debezium-registry';
import {
  nestedFieldCount,
  writerFieldChanges,
  type FieldState,
  type WriterFieldChanges,
} from './field-state';
import { MAX_TABLE_FIELDS } from './schema-budget';

/**
 * A decoder's columns, and for registry formats what its writer schemas made of them: each
 * column's type as the latest writer that named it declared it, how many fields each is
 * (nested ones included, MAX_TABLE_FIELDS), and the writers whose every field is a column of
 * its type, checked once each. They persist across batches; the batch's builders are the
 * decoder's (record-decoder.ts), which follow every change made here.
 */
export class DecoderColumns {
  readonly fields: FieldState[];
  readonly byName = new Map<string, FieldState>();
  /** Registry formats: each column's type as the latest writer schema that named it declared it (JSON). */
  readonly writerTypes = new Map<string, string>();
  /** Registry formats: how many fields each writer column is, nested ones included (MAX_TABLE_FIELDS). */
  readonly #nestedFields = new Map<string, number>();
  /**
   * Registry formats: writers whose every field is a column of its type, checked once each: a
   * schema id, or for Protobuf an id and a message of it ("7/1.0"), since one file's messages
   * map to different columns.
   */
  readonly admitted = new Set<string>();

  constructor(
    fields: FieldState[],
    private readonly limits: { readonly maxInferredColumns: number; readonly epochUnit: EpochUnit },
  ) {
    this.fields = fields;
    for (const f of fields) this.byName.set(f.name, f);
  }

  /** A schema id the registry now reads differently: its writers are checked again. */
  forget(id: number): void {
    for (const writer of this.admitted)
      if (writer === String(id) || writer.startsWith(`${id}/`)) this.admitted.delete(writer);
  }

  /**
   * What a writer schema's columns change, held to the column caps (the retyped ones are not
   * applied: the caller ends its segment first, then calls `retype`).
   */
  admit({
    writer,
    schemaId,
    fields: columns,
  }: WriterColumns): WriterFieldChanges | Omit<DeadLetterVerdict, 'offset'> {
    const changes = this.admitted.has(writer)
      ? { added: [], types: [], retyped: [] }
      : writerFieldChanges(columns, this.writerTypes, this.limits.epochUnit);
    // The writer schemas widen the table like inferred keys do, and are held to the same cap:
    // a schema (or a run of versions) adding names without bound is a producer's choice.
    const count = this.fields.length + changes.added.length;
    if (count > this.limits.maxInferredColumns)
      return {
        reason: 'too-many-columns',
        detail: `schema id ${schemaId} would make ${count} data columns, beyond maxInferredColumns ${this.limits.maxInferredColumns}`,
      };
    const nested = this.#nestedFieldsWith(columns, changes);
    if (nested.total > MAX_TABLE_FIELDS)
      return {
        reason: 'too-many-columns',
        detail: `schema id ${schemaId} would make the table's columns ${nested.total} fields, nested ones included, beyond ${MAX_TABLE_FIELDS}`,
      };
    for (const [name, n] of nested.changed) this.#nestedFields.set(name, n);
    return changes;
  }

  /** Columns a writer gives another type take it; writers admitted against the old types are checked again. */
  retype(retyped: WriterFieldChanges['retyped']): void {
    for (const [field, type] of retyped) {
      const at = this.fields.findIndex((f) => f.name === field.name);
      this.fields[at] = field;
      this.byName.set(field.name, field);
      this.writerTypes.set(field.name, type);
    }
    this.admitted.clear();
  }

  /** A record's new columns (converted with it) join the fields; its writer is admitted. */
  take(
    added: readonly FieldState[],
    types: readonly (readonly [string, string])[],
    writer: string | undefined,
  ): void {
    for (const field of added) {
      this.fields.push(field);
      this.byName.set(field.name, field);
    }
    for (const [name, type] of types) this.writerTypes.set(name, type);
    if (writer !== undefined) this.admitted.add(writer);
  }

  /** The fields the table's columns would be with a writer's changes, nested ones included, and the changed columns' counts. */
  #nestedFieldsWith(
    writerFields: readonly NamedField[],
    changes: WriterFieldChanges,
  ): { total: number; changed: Map<string, number> } {
    const changed = new Map<string, number>();
    if (changes.added.length === 0 && changes.retyped.length === 0) return { total: 0, changed };
    const names = new Set([...changes.added.map((f) => f.name), ...changes.retyped.map(([f]) => f.name)]);
    for (const f of writerFields) if (names.has(f.name)) changed.set(f.name, nestedFieldCount(f));
    let total = 0;
    for (const f of this.fields) total += changed.get(f.name) ?? this.#nestedFields.get(f.name) ?? 1;
    for (const f of changes.added) total += changed.get(f.name) ?? 1;
    return { total, changed };
  }
}
