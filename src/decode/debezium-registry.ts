import type { NamedField, Row } from '../config';
import type { KeyFormat } from '../config/formats';
import { KEY_FIELD_TYPES, SEQUENCE_COLUMN } from '../config/upsert-options';
import type { DeadLetterVerdict } from '../dead-letters/dead-letter-reason';
import type { WriterSchema } from '../schema-registry/wire-format';
import { jsonKeyOf } from './debezium-envelope';
import { writerSchemasFor } from './registry-formats';
import type { WriterSchemas } from './registry-writer-schemas';

/**
 * Debezium change events through the Schema Registry (Kafka Connect's AvroConverter): an
 * envelope record whose `after` (a union of null and the row's record) gives the table's
 * columns, mapped as any Avro field is (avro-mapping.ts: decimals, Debezium's temporal types).
 * The event itself is read by debezium-envelope.ts, the same as a JSON event: the envelope's
 * row holds the same `op`, `before`, `after` and `source`.
 */

export type ColumnsVerdict = Omit<DeadLetterVerdict, 'offset'>;

/** A writer's columns: `writer` names the schema for the decoder's bookkeeping of admitted writers. */
export interface WriterColumns {
  readonly writer: string;
  readonly schemaId: number;
  readonly fields: readonly NamedField[];
}

/**
 * The table's columns from an envelope schema's fields: those of its `after` record, the
 * key's never null (Lance's primary key takes only non-nullable columns), every other one
 * nullable (a delete's row holds its key only), and `_sequence` when the definition orders
 * a key's records by the event's sequence.
 */
export function envelopeColumns(
  envelope: readonly NamedField[],
  keyFields: readonly string[],
  sequence: boolean,
  schemaId: number,
): NamedField[] | ColumnsVerdict {
  const after = envelope.find((f) => f.name === 'after');
  if (after?.type !== 'struct' || !envelope.some((f) => f.name === 'op'))
    return {
      reason: 'not-a-change-event',
      detail: `schema id ${schemaId} is not a Debezium envelope: no "op" and "after" record`,
    };
  const columns = keyed(after.fields, keyFields, schemaId);
  if (!Array.isArray(columns)) return columns;
  for (const name of keyFields)
    if (!columns.some((f) => f.name === name))
      return {
        reason: 'schema-mismatch',
        field: name,
        detail: `key field "${name}" is not a column of the "after" record of schema id ${schemaId}`,
      };
  return sequence ? [...columns, { name: SEQUENCE_COLUMN, type: 'int64', nullable: true }] : columns;
}

/** Each field with the key's columns not null and the others nullable; a key column of a type no merge can join on is refused. */
function keyed(
  fields: readonly NamedField[],
  keyFields: readonly string[],
  schemaId: number,
): NamedField[] | ColumnsVerdict {
  const out: NamedField[] = [];
  for (const f of fields) {
    const key = keyFields.includes(f.name);
    if (key && !KEY_FIELD_TYPES.includes(f.type))
      return {
        reason: 'schema-mismatch',
        field: f.name,
        detail: `key field "${f.name}" is ${f.type} in schema id ${schemaId}: a key field is one of ${KEY_FIELD_TYPES.join(', ')}`,
      };
    out.push({ ...f, nullable: !key });
  }
  return out;
}

/**
 * A Debezium event's record key, read when an event needs it (a tombstone, a delete without
 * `before`): JSON (`keyFormat` binary or string, Kafka Connect's JsonConverter), or a registry
 * format, whose key schema's fields also give the key's columns when the values are a registry
 * format's too (a tombstone may be the first record a decoder sees of its table: a compacted
 * topic's; JSON values declare the key's columns).
 */
export class DebeziumKeys {
  readonly #schemas: WriterSchemas | undefined;

  constructor(
    keyFormat: KeyFormat,
    private readonly keyFields: readonly string[],
  ) {
    this.#schemas =
      keyFormat === 'binary' || keyFormat === 'string'
        ? undefined
        : writerSchemasFor(keyFormat, { connectTypes: true });
  }

  learn(schemas: readonly WriterSchema[]): void {
    this.#schemas?.learn(schemas);
  }

  /** The key's fields, and with a registry key its key columns; undefined when the key is none or unreadable. */
  read(
    key: Uint8Array | null,
  ): { readonly row: Row; readonly columns?: WriterColumns } | ColumnsVerdict | undefined {
    if (key === null) return undefined;
    if (!this.#schemas) {
      const row = jsonKeyOf(key);
      return row && { row };
    }
    const decoded = this.#schemas.decode(key);
    if ('reason' in decoded) return { reason: decoded.reason, detail: `the record key: ${decoded.detail}` };
    const fields = keyed(
      decoded.fields.filter((f) => this.keyFields.includes(f.name)),
      this.keyFields,
      decoded.schemaId,
    );
    if (!Array.isArray(fields)) return fields;
    return {
      row: decoded.row,
      columns: { writer: `${decoded.schemaId}/key`, schemaId: decoded.schemaId, fields },
    };
  }
}
