import type { Row } from '../config';
import { SEQUENCE_COLUMN, type Truncates } from '../config/upsert-options';
import type { DeadLetterReason } from '../dead-letters/dead-letter-reason';
import { DataType } from 'apache-arrow';
import { createHash } from 'node:crypto';
import { mayHoldUnsafeInteger, parseJsonExact } from './exact-json';
import type { FieldState } from './field-state';

/**
 * Debezium change events in JSON (Kafka Connect's JsonConverter, with or without
 * `schemas.enable`) or in Avro (an envelope record's row, debezium-registry.ts): what one event
 * does to an upsert table. `c` (create), `r` (snapshot
 * read) and `u` (update) write the `after` state; `d` deletes the key, read from `before`
 * (or, when `before` is null, REPLICA IDENTITY NOTHING, from the record key). A truncate
 * (`t`) deletes every row before it (`truncate: 'apply'`, staged as a delete row without a
 * key: src/lance/upsert-merge.ts) or is a dead letter (`'dead-letter'`, the default). An `after` holding Debezium's
 * placeholder for an unchanged TOASTed column (placeholderIn: as text, or in a bytea's,
 * array's or hstore's shape) is staged as the placeholder when the column is a string (its
 * text), binary (its bytes) or a list (an array's shape): the merge keeps the stored value there
 * (src/lance/upsert-merge.ts). In a column of another type no merge resolves it, so it is
 * refused, never stored.
 */

/** The value Debezium's PostgreSQL connector sends for an unchanged TOASTed column. */
export const UNAVAILABLE_VALUE = '__debezium_unavailable_value';

const PLACEHOLDER_BYTES = Buffer.from(UNAVAILABLE_VALUE, 'utf8');

/**
 * The placeholder as text in columns of other types, the way Kafka Connect writes them: a
 * bytea's bytes under `binary.handling.mode` base64 (JsonConverter's bytes too),
 * base64-url-safe and hex, and an hstore's map under `hstore.handling.mode=json`.
 */
const ENCODED_PLACEHOLDERS = new Set([
  PLACEHOLDER_BYTES.toString('base64'),
  PLACEHOLDER_BYTES.toString('base64url'),
  PLACEHOLDER_BYTES.toString('hex'),
  JSON.stringify({ [UNAVAILABLE_VALUE]: UNAVAILABLE_VALUE }),
]);

/** A uuid[]'s placeholder: Java's UUID.nameUUIDFromBytes of the placeholder (an MD5, version 3). */
const PLACEHOLDER_UUID = (() => {
  const md5 = createHash('md5').update(PLACEHOLDER_BYTES).digest();
  md5[6] = (md5[6]! & 0x0f) | 0x30;
  md5[8] = (md5[8]! & 0x3f) | 0x80;
  const hex = md5.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
})();

/**
 * How a value is Debezium's placeholder for an unchanged TOASTed column (the PostgreSQL
 * connector's UnchangedToastedPlaceholder): 'text' when it is a string (the placeholder, or
 * its text in a bytea or hstore column), which a string or binary column takes for the merge
 * to resolve; 'typed' when it is the placeholder in another type's shape (a bytea's bytes,
 * which a binary column takes, an array of the placeholder, of its bytes or of its UUID, an
 * int[] or bigint[] of its bytes, which a list column takes, an hstore map of it, which no
 * merge resolves); undefined when it is a value.
 */
export function placeholderIn(value: unknown): 'text' | 'typed' | undefined {
  if (typeof value === 'string')
    return value === UNAVAILABLE_VALUE || ENCODED_PLACEHOLDERS.has(value) ? 'text' : undefined;
  if (value instanceof Uint8Array) return PLACEHOLDER_BYTES.equals(value) ? 'typed' : undefined;
  if (Array.isArray(value)) {
    if (value.length === 1) {
      const only: unknown = value[0];
      if (only === PLACEHOLDER_UUID || (isObject(only) && isPlaceholderEntry(only))) return 'typed';
      if (placeholderIn(only) !== undefined) return 'typed';
    }
    // int[] and bigint[]: one element per byte of the placeholder.
    if (
      value.length === PLACEHOLDER_BYTES.length &&
      value.every(
        (v, i) => (typeof v === 'number' || typeof v === 'bigint') && Number(v) === PLACEHOLDER_BYTES[i],
      )
    )
      return 'typed';
    return undefined;
  }
  // An hstore as a map (JSON object); in Avro a map is read as a list of entries (above).
  if (isObject(value) && isPlaceholderEntry({ key: Object.keys(value)[0], value: Object.values(value)[0] }))
    return Object.keys(value).length === 1 ? 'typed' : undefined;
  return undefined;
}

function isPlaceholderEntry(entry: Record<string, unknown>): boolean {
  return entry.key === UNAVAILABLE_VALUE && entry.value === UNAVAILABLE_VALUE;
}

export type ChangeEvent =
  | { readonly kind: 'upsert'; readonly row: Row }
  | { readonly kind: 'truncate'; readonly sequence?: number | bigint | null }
  | { readonly kind: 'delete'; readonly key: Row }
  | { readonly reason: DeadLetterReason; readonly detail: string; readonly field?: string };

/**
 * How a column keeps Debezium's placeholder for the merge to replace with the stored value:
 * `text`, a string column or one not declared (inferred from the placeholder, a string), where
 * it is staged as the placeholder's text; `bytes`, a binary column (a bytea), where it is staged
 * as the placeholder's UTF-8 bytes; `list`, a list of strings, binary or integers (a text[],
 * bytea[], uuid[], int[] or bigint[]), where it is staged in the array's shape Debezium gives it.
 * Undefined: a column of another type (an hstore map among them), where the placeholder is a
 * dead letter.
 */
export type PlaceholderColumn = 'text' | 'bytes' | 'list';

export function takesPlaceholder(field: FieldState | undefined): PlaceholderColumn | undefined {
  if (field === undefined) return 'text';
  const type = field.codec.arrowType();
  if (DataType.isUtf8(type) || DataType.isLargeUtf8(type)) return 'text';
  if (DataType.isBinary(type) || DataType.isLargeBinary(type)) return 'bytes';
  if (DataType.isList(type)) {
    const item = type.children[0]!.type as DataType;
    if (
      DataType.isUtf8(item) ||
      DataType.isLargeUtf8(item) ||
      DataType.isBinary(item) ||
      DataType.isLargeBinary(item) ||
      DataType.isInt(item)
    )
      return 'list';
  }
  return undefined;
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
 * when an event needs them: JSON here, Avro through the registry (debezium-registry.ts).
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
    /** Whether a column is one where the merge resolves the TOASTed placeholder, and as what it is staged there. */
    readonly takesPlaceholder?: (field: string) => PlaceholderColumn | undefined;
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
  const takesPlaceholder = options.takesPlaceholder ?? (() => undefined);
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
  takesPlaceholder: (field: string) => PlaceholderColumn | undefined,
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
      let row = event.after;
      for (const [field, v] of Object.entries(event.after)) {
        const placeholder = placeholderIn(v);
        if (placeholder === undefined) continue;
        // A create holds it only for a primary-key update (a delete and a create): the old
        // key's row, where the value was, is deleted by then, and the create names it in a
        // header only.
        if (event.op === 'c')
          return {
            reason: 'unavailable-value',
            field,
            detail: `column "${field}" is Debezium's placeholder for an unchanged TOASTed value in the create of a primary-key update, whose old row holds the value; set REPLICA IDENTITY FULL on the source table`,
          };
        const column = keyFields.includes(field) ? undefined : takesPlaceholder(field);
        // A typed placeholder is kept as a bytea's bytes in a binary column and as an array's
        // shape in a list column; a list column takes no other.
        const typedKept =
          (column === 'bytes' && v instanceof Uint8Array) || (column === 'list' && Array.isArray(v));
        if (column === undefined || ((placeholder === 'typed' || column === 'list') && !typedKept))
          return {
            reason: 'unavailable-value',
            field,
            detail: `column "${field}" is Debezium's placeholder for an unchanged TOASTed value, in a column that is neither a string, binary nor a list of those or of integers (the merge keeps the stored value of those only); set REPLICA IDENTITY FULL on the source table`,
          };
        if (!keyLookup)
          return {
            reason: 'unavailable-value',
            field,
            detail: `column "${field}" is Debezium's placeholder for an unchanged TOASTed value, and no key column is a string, integer, boolean or binary one to look the stored row up by; set REPLICA IDENTITY FULL on the source table`,
          };
        // Staged as the placeholder the merge looks for: in a string column its text (a bytea's or
        // hstore's text too), in a binary one its bytes (JSON's binary columns read base64).
        if (column === 'list') {
          // Staged as it came: the reduction finds the array's shape (placeholderIn).
        } else if (column === 'bytes') {
          if (!typedKept) row = { ...row, [field]: PLACEHOLDER_BYTES.toString('base64') };
        } else if (v !== UNAVAILABLE_VALUE) row = { ...row, [field]: UNAVAILABLE_VALUE };
      }
      return { kind: 'upsert', row };
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
