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
  | 'transform-failed';

export interface DeadLetterVerdict {
  readonly offset: number;
  readonly reason: DeadLetterReason;
  /** A human sentence: which field, what was expected. */
  readonly detail: string;
  /** The field at fault, when one is (schema-mismatch): a stop report names the most common. */
  readonly field?: string;
}
