import type { Row } from '../config';
import type { Truncates } from '../config/upsert-options';
import type { DeadLetterReason } from '../dead-letters/dead-letter-reason';
import {
  filterableKeyType,
  readChangeEvent,
  readTombstone,
  takesPlaceholder,
  type ChangeEvent,
} from './debezium-envelope';
import type { ColumnsVerdict, DebeziumKeys, WriterColumns } from './debezium-registry';
import type { FieldState } from './field-state';

/**
 * A Debezium record as the decoder stages it (record-decoder.ts): the envelope's reading
 * (debezium-envelope.ts) with the record key read through `DebeziumKeys` and the columns the
 * decoder has, so the decoder itself only stages rows.
 */

/**
 * A tombstone's delete: its key's fields from the record key, and the key schema's columns
 * when they are the table's (`registryValues`: a JSON value's columns are the declared fields,
 * the key's among them, so a registry key's columns would name them a second time).
 */
export function tombstoneDelete(
  keys: DebeziumKeys,
  key: Uint8Array | null,
  keyFields: readonly string[],
  registryValues: boolean,
): { readonly key: Row; readonly columns: WriterColumns | undefined } | ColumnsVerdict {
  // A registry key's schema gives the key's columns, for a tombstone that comes before any event of its table.
  const recordKey = keys.read(key);
  if (recordKey && 'reason' in recordKey) return recordKey;
  const change = readTombstone(() => recordKey?.row, keyFields);
  if ('reason' in change) return change;
  return { key: change.key, columns: registryValues ? recordKey?.columns : undefined };
}

/**
 * One event's change. `field`: the column of a name (the decoder's, or one the event's
 * writer adds), for where the TOASTed placeholder may stand and whether the key can look a
 * stored row up.
 */
export function changeOf(
  event: unknown,
  key: Uint8Array | null,
  keys: DebeziumKeys,
  field: (name: string) => FieldState | undefined,
  options: {
    readonly upsertKey: readonly string[];
    readonly truncate: Truncates | undefined;
    readonly sequence: string | undefined;
  },
): ChangeEvent {
  // Why a registry key could not be read, told instead of `missing-key` when the event needed it.
  let keyProblem: { reason: DeadLetterReason; detail: string; field?: string } | undefined;
  const recordKey = () => {
    const read = keys.read(key);
    if (read && 'reason' in read) keyProblem = read;
    return read && 'row' in read ? read.row : undefined;
  };
  const change = readChangeEvent(event, recordKey, options.upsertKey, {
    takesPlaceholder: (f) => takesPlaceholder(field(f)),
    truncate: options.truncate,
    sequence: options.sequence,
    keyLookup: options.upsertKey.some((k) => filterableKeyType(field(k)?.codec.arrowType())),
  });
  return 'reason' in change && change.reason === 'missing-key' && keyProblem ? keyProblem : change;
}
