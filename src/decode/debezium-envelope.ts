import type { Row } from '../config';
import { SEQUENCE_COLUMN, type Truncates } from '../config/upsert-options';
import type { DeadLetterReason } from '../dead-letters/dead-letter-reason';
import { DataType } from 'apache-arrow';
import { mayHoldUnsafeInteger, parseJsonExact } from './exact-json';
import type { FieldState } from './field-state';

/**
 * Debezium change events in JSON (Kafka Connect's JsonConverter, with or without
 * `schemas.enable`) or in Avro (an envelope record's row, debezium-keys.ts): what one event
 * does to an upsert table. `c` (create), `r` (snapshot
 * read) and `u` (update) write the `after` state; `d` deletes the key, read from `before`
 * (or, when `before` is null, REPLICA IDENTITY NOTHING, from the record key). A truncate
 * (`t`) deletes every row before it (`truncate: 'apply'`, staged as a delete row without a
 * key: src/lance/upsert-merge.ts) or is a dead letter (`'dead-letter'`, the default). An `after` holding Debezium's
 * placeholder for an unchanged TOASTed column is staged as it is when the column is a
 * string: the merge keeps the stored value there (src/lance/upsert-merge.ts). In a column of
 * another type it would not survive the conversion, so it is refused.
 */

/** The value Debezium's PostgreSQL connector sends for an unchanged TOASTed column. */
export const UNAVAILABLE_VALUE = '__debezium_unavailable_value';

export type ChangeEvent =
  | { readonly kind: 'upsert'; readonly row: Row }
  | { readonly kind: 'truncate'; readonly sequence?: number | bigint | null }
  | { readonly kind: 'delete'; readonly key: Row }
  | { readonly reason: DeadLetterReason; readonly detail: string; readonly field?: string };

/**
 * Whether a column keeps Debezium's placeholder as it is, for the merge to replace with the
 * stored value: a string column, or one not declared (inferred from the placeholder, a string).
 */
export function takesPlaceholder(field: FieldState | undefined): boolean {
  if (field === undefined) return true;
  const type = field.codec.arrowType();
  return DataType.isUtf8(type) || DataType.isLargeUtf8(type);
}

/**
 * Whether a key column's values can be named exactly in a filter (strings, integers,
 * booleans, binary as X'..'): the merge finds the stored row of a placeholder's key by them
 * (src/lance/upsert-merge.ts). A key without one (times only) leaves the placeholder a dead
 * letter rather than read the whole table.
 */
export function filterableKeyType(type: DataType | undefined): boolean {
  return (
    type !== undefined &&
    (DataType.isUtf8(type) ||
      DataType.isLargeUtf8(type) ||
      DataType.isInt(type) ||
      DataType.isBool(type) ||
      DataType.isBinary(type) ||
      DataType.isLargeBinary(type))
  );
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A JsonConverter message with `schemas.enable`: `{schema, payload}`; without it, the payload itself. */
function payloadOf(value: unknown): unknown {
  if (isObject(value) && 'payload' in value && 'schema' in value && Object.keys(value).length === 2)
    return value.payload;
  return value;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * The record key's fields (a Debezium key is a struct of the primary key's columns), read
 * when an event needs them: JSON here, Avro through the registry (debezium-keys.ts).
 */
export type RecordKey = () => Row | undefined;

/** A JsonConverter key's fields, with or without `schemas.enable`. */
export function jsonKeyOf(key: Uint8Array | null): Row | undefined {
  if (key === null) return undefined;
  try {
    const text = utf8.decode(key);
    const parsed = payloadOf(mayHoldUnsafeInteger(key) ? parseJsonExact(text) : JSON.parse(text));
    return isObject(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A tombstone (null value) in Debezium mode: its key's delete, the key read from the
 * record key. Debezium follows each delete with one for log compaction, and once the
 * cleaner has removed the `d` before it (a later record of the key keeps only the
 * newest), the tombstone is all a replica reading the topic later sees of the delete.
 */
export function readTombstone(
  recordKey: RecordKey,
  keyFields: readonly string[],
): Exclude<ChangeEvent, { kind: 'upsert' | 'truncate' }> {
  const source = recordKey();
  if (!source || keyFields.some((f) => source[f] === undefined || source[f] === null))
    return {
      reason: 'missing-key',
      detail: `a tombstone whose record key does not hold the key (${keyFields.join(', ')})`,
    };
  return { kind: 'delete', key: Object.fromEntries(keyFields.map((f) => [f, source[f]])) };
}

/**
 * One Debezium event (a parsed JSON value, or an Avro envelope's row: the same fields) and
 * its record key → its change, or why it is a dead letter.
 */
export function readChangeEvent(
  value: unknown,
  recordKey: RecordKey,
  keyFields: readonly string[],
  options: {
    /** Whether a column is a string one, where the merge resolves the TOASTed placeholder. */
    readonly takesPlaceholder?: (field: string) => boolean;
    /** What a truncate does (config/upsert-options.ts); absent: 'dead-letter'. */
    readonly truncate?: Truncates | undefined;
    /**
     * Whether the key has a column the merge can find a stored row by (`filterableKeyType`);
     * without one a placeholder is a dead letter. Absent: true.
     */
    readonly keyLookup?: boolean | undefined;
    /** A dotted path into the event whose integer orders a key's records (`source.lsn`), staged in `_sequence`. */
    readonly sequence?: string | undefined;
  } = {},
): ChangeEvent {
  const takesPlaceholder = options.takesPlaceholder ?? (() => false);
  const change = readChange(
    value,
    recordKey,
    keyFields,
    takesPlaceholder,
    options.truncate,
    options.keyLookup ?? true,
  );
  if (options.sequence === undefined || !('kind' in change)) return change;
  if (change.kind === 'truncate')
    return { kind: 'truncate', sequence: sequenceOf(payloadOf(value), options.sequence) };
  const sequence = { [SEQUENCE_COLUMN]: sequenceOf(payloadOf(value), options.sequence) };
  return change.kind === 'upsert'
    ? { kind: 'upsert', row: { ...change.row, ...sequence } }
    : { kind: 'delete', key: { ...change.key, ...sequence } };
}

/**
 * The integer at a dotted path of the event, or null (the row is then ordered by its Kafka
 * position alone): a number, or a bigint from the exact parse of a value beyond 2^53.
 */
function sequenceOf(event: unknown, path: string): number | bigint | null {
  let at: unknown = event;
  for (const part of path.split('.')) at = isObject(at) ? at[part] : undefined;
  if (typeof at === 'bigint' || (typeof at === 'number' && Number.isSafeInteger(at))) return at;
  return null;
}

function readChange(
  value: unknown,
  recordKey: RecordKey,
  keyFields: readonly string[],
  takesPlaceholder: (field: string) => boolean,
  truncate: Truncates | undefined,
  keyLookup: boolean,
): ChangeEvent {
  const event = payloadOf(value);
  if (!isObject(event) || typeof event.op !== 'string')
    return { reason: 'not-a-change-event', detail: 'not a Debezium change event: no "op"' };
  switch (event.op) {
    case 'c':
    case 'r':
    case 'u': {
      if (!isObject(event.after))
        return { reason: 'not-a-change-event', detail: `op "${event.op}" without an "after" object` };
      for (const [field, v] of Object.entries(event.after)) {
        // A create holds it only for a primary-key update (a delete and a create): the old
        // key's row, where the value was, is deleted by then, and the create names it in a
        // header only.
        if (event.op === 'c' && v === UNAVAILABLE_VALUE)
          return {
            reason: 'unavailable-value',
            field,
            detail: `column "${field}" is Debezium's placeholder for an unchanged TOASTed value in the create of a primary-key update, whose old row holds the value; set REPLICA IDENTITY FULL on the source table`,
          };
        if (v === UNAVAILABLE_VALUE && (keyFields.includes(field) || !takesPlaceholder(field)))
          return {
            reason: 'unavailable-value',
            field,
            detail: `column "${field}" is Debezium's placeholder for an unchanged TOASTed value, in a column that is not a string; set REPLICA IDENTITY FULL on the source table`,
          };
        if (v === UNAVAILABLE_VALUE && !keyLookup)
          return {
            reason: 'unavailable-value',
            field,
            detail: `column "${field}" is Debezium's placeholder for an unchanged TOASTed value, and no key column is a string, integer, boolean or binary one to look the stored row up by; set REPLICA IDENTITY FULL on the source table`,
          };
      }
      return { kind: 'upsert', row: event.after };
    }
    case 'd': {
      const source = isObject(event.before) ? event.before : recordKey();
      if (!source || keyFields.some((f) => source[f] === undefined || source[f] === null))
        return {
          reason: 'missing-key',
          detail: `a delete whose "before" and record key do not hold the key (${keyFields.join(', ')})`,
        };
      return { kind: 'delete', key: Object.fromEntries(keyFields.map((f) => [f, source[f]])) };
    }
    case 't':
      if (truncate !== 'apply')
        return {
          reason: 'debezium-truncate',
          detail:
            'a truncate of the source table, not applied (truncate: "dead-letter", the default); the rows stay',
        };
      return { kind: 'truncate' };
    default:
      return { reason: 'not-a-change-event', detail: `op "${event.op}" is not a row change` };
  }
}
