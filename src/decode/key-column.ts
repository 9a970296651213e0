import type { DeclaredField, EpochUnit } from '../config';
import type { KeyFormat } from '../config/formats';
import type { WriterSchema } from '../schema-registry/wire-format';
import type { DeadLetterVerdict } from '../dead-letters/dead-letter-reason';
import { FIELD_CODECS, Invalid, type Converted, type FieldCodec } from './field-codec';
import { writerSchemasFor } from './registry-formats';
import type { WriterSchemas } from './registry-writer-schemas';
import { codecOf, typeLabel } from './typed-codecs';

const utf8 = new TextDecoder('utf-8', { fatal: true });

export type KeyVerdict = Omit<DeadLetterVerdict, 'offset'>;

/**
 * What `includeKey` puts in the `_key` column, read as `keyFormat` says (Kafka Connect's
 * key.converter, beside `format` for the value): `binary`, the key's bytes as they are;
 * `string`, UTF-8 text (a key that is not UTF-8 is a dead letter); `avro`, `protobuf`,
 * `json-schema`, a key in the Confluent wire format, decoded with its writer schema from
 * the registry into a struct of the schema's columns, mapped as a value's would be (an
 * Avro `"string"` key is `struct<value: string>`, like a value's `value` column).
 *
 * A registry key's struct is the table's `_key` type when the table has one (`tableType`,
 * as value columns are held to theirs), else the first key schema's columns: a key schema
 * with other columns is a dead letter (schema-mismatch on `_key`), since a column's type
 * cannot change; otherwise the parts would carry a `_key` the table refuses, and every
 * publication from then on would be set aside. Until a batch of this decoder has seen a
 * key schema the type is unknown, and a batch of null keys only carries no `_key` column
 * (the table's rows take null there).
 */
export class KeyColumn {
  readonly #format: KeyFormat;
  readonly #epochUnit: EpochUnit;
  readonly #schemas: WriterSchemas | undefined;
  #codec: FieldCodec | undefined;
  /** A registry key's struct type as JSON (nullability included) and as a label for messages. */
  #identity: string | undefined;
  #label: string | undefined;

  /** `tableType`: the table's `_key` Arrow type (its text), when the table has the column. */
  constructor(
    format: KeyFormat,
    epochUnit: EpochUnit,
    private readonly tableType?: string,
  ) {
    this.#format = format;
    this.#epochUnit = epochUnit;
    this.#schemas = writerSchemasFor(format === 'binary' || format === 'string' ? 'json' : format);
    if (format === 'binary') this.#codec = codecOf({ type: 'binary' }, epochUnit);
    if (format === 'string') this.#codec = FIELD_CODECS.string;
  }

  /** The column's codec once its type is known (binary and string: from the start). */
  get codec(): FieldCodec | undefined {
    return this.#codec;
  }

  learn(schemas: readonly WriterSchema[]): void {
    this.#schemas?.learn(schemas);
  }

  /** One record's key → its `_key` value, or why the record is a dead letter. */
  convert(key: Uint8Array | null): { value: Converted } | KeyVerdict {
    if (key === null) return { value: null };
    switch (this.#format) {
      case 'binary':
        return { value: key };
      case 'string':
        try {
          return { value: utf8.decode(key) };
        } catch {
          return { reason: 'invalid-utf8', detail: 'the key is not valid UTF-8 (keyFormat "string")' };
        }
      default:
        return this.#registry(key);
    }
  }

  #registry(key: Uint8Array): { value: Converted } | KeyVerdict {
    const decoded = this.#schemas!.decode(key);
    if ('reason' in decoded) return { reason: decoded.reason, detail: `the key: ${decoded.detail}` };
    const type: DeclaredField = { type: 'struct', fields: decoded.fields, nullable: true };
    const label = typeLabel(type);
    const identity = JSON.stringify(type);
    if (this.#identity === undefined) {
      const codec = codecOf(type, this.#epochUnit);
      // Each Arrow type prints itself with its children ('Struct<{id:Int64}>'), the text publications compare.
      // eslint-disable-next-line @typescript-eslint/no-base-to-string
      const arrowType = String(codec.arrowType());
      // The publication's rule (sameColumnType, src/lance/table-schema.ts): the same type, or Int32 into Int64.
      if (
        this.tableType !== undefined &&
        arrowType !== this.tableType &&
        !(this.tableType === 'Int64' && arrowType === 'Int32')
      )
        return {
          reason: 'schema-mismatch',
          field: '_key',
          detail: `the key's schema id ${decoded.schemaId} makes _key ${arrowType}, the table's _key is ${this.tableType} (a column's type cannot change)`,
        };
      this.#codec = codec;
      this.#identity = identity;
      this.#label = label;
    } else if (this.#identity !== identity) {
      return {
        reason: 'schema-mismatch',
        field: '_key',
        detail: `the key's schema id ${decoded.schemaId} makes _key ${label}, the column is ${this.#label} (a column's type cannot change)`,
      };
    }
    const value = this.#codec!.convert(decoded.row, this.#epochUnit);
    if (value instanceof Invalid)
      return {
        reason: 'schema-mismatch',
        field: '_key',
        detail: `the key of schema id ${decoded.schemaId}: ${value.why ?? `not a ${label}`}`,
      };
    return { value };
  }
}
