/** Why a record could not be staged; sent with every dead letter and counted per reason. */
export type DeadLetterReason =
  | 'invalid-utf8'
  | 'invalid-json'
  | 'not-an-object'
  | 'schema-mismatch'
  /** `schema: 'infer'`: the record would add columns beyond `maxInferredColumns`. */
  | 'too-many-columns'
  | 'invalid-event-time'
  | 'too-large'
  | 'tombstone'
  /** Upsert mode: the record (or a Debezium delete) holds no key, so it names no row. */
  | 'missing-key'
  /** Debezium envelope: a value that is not a change event (no `op`, an unknown op). */
  | 'not-a-change-event'
  /** Debezium envelope: a truncate not applied (`truncate: 'dead-letter'`, the default; the rows stay). */
  | 'debezium-truncate'
  /**
   * Debezium envelope: a TOASTed placeholder in a column that is neither a string, binary nor a list, in a primary-key
   * update's create, or in a table whose key is of times only (no column to look its row up by).
   */
  | 'unavailable-value'
  | 'transform-failed'
  /** A `table` template or `route` named no valid table for the record, or the route threw. */
  | 'invalid-table'
  /** Registry formats: not the Confluent wire format (magic byte 0, 4-byte schema id). */
  | 'wrong-magic-byte'
  /** Registry formats: the registry has no schema with the value's id. */
  | 'unknown-schema-id'
  /** Registry formats: a writer schema of another type, or one with no Arrow mapping. */
  | 'unsupported-schema'
  /** Registry formats: the payload is not a datum of its writer schema. */
  | 'undecodable-payload'
  /** Protobuf: the message-index list is malformed or names no message of the writer schema. */
  | 'invalid-message-index'
  /** JSON Schema: the payload is JSON that its writer schema rejects. */
  | 'schema-validation-failed';

export interface DeadLetterVerdict {
  readonly offset: number;
  readonly reason: DeadLetterReason;
  /** A human sentence: which field, what was expected. */
  readonly detail: string;
  /** The field at fault, when one is (schema-mismatch): a stop report names the most common. */
  readonly field?: string;
}
