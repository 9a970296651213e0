import type { ResolvedConsumer } from '../config';
import type { KeyFormat } from '../config/formats';
import type { Envelope, Truncates } from '../config/upsert-options';
import type { InferredTypeName } from './field-codec';

/** What a RecordDecoder (record-decoder.ts) is built from: the consumer's definition, resolved. */
export type DecoderOptions = Pick<
  ResolvedConsumer,
  | 'format'
  | 'fields'
  | 'transform'
  | 'eventTimeField'
  | 'includeKey'
  | 'maxRecordBytes'
  | 'tombstones'
  | 'epochUnit'
  | 'maxInferredColumns'
> & {
  /** 'debezium': values are change events (debezium-envelope.ts); absent: 'none'. */
  readonly envelope?: Envelope;
  /** 'debezium': what a truncate does (upsert-options.ts); absent: 'dead-letter'. */
  readonly truncate?: Truncates | undefined;
  /** 'debezium': the event's path whose integer is staged in `_sequence` (upsert-options.ts). */
  readonly sequence?: string | undefined;
  /** Upsert mode: the key's columns (ResolvedConsumer.upsertKey); absent or undefined in append mode. */
  readonly upsertKey?: readonly string[] | undefined;
  /**
   * `schema: 'infer'` only: the columns the table already has (from its Lance schema),
   * so that a column keeps the table's type whatever kind this decoder sees first.
   * Names starting with "_" (the system columns) are skipped.
   */
  readonly knownFields?: readonly KnownField[];
  /** With `includeKey`: how the key becomes `_key` (key-column.ts); `binary` when absent. */
  readonly keyFormat?: KeyFormat;
  /** A registry `keyFormat`: the table's `_key` Arrow type (its text), which keys are held to. */
  readonly tableKeyType?: string;
};

/** A data column of the table, as a seed for inference. */
export interface KnownField {
  readonly name: string;
  readonly type: InferredTypeName;
}
