import { z } from 'zod';
import type { KeyFormat } from './formats';

/**
 * How a definition's rows go into its table (`mode`), and in upsert mode which value is
 * a row's key (`key`). docs/upserts-and-cdc.md is the user's page; the design is in
 * docs/design/upserts.md.
 */

/** `append`: every record is a new row. `upsert`: one row per key, the newest record's value. */
export const MODES = ['append', 'upsert'] as const;
export type Mode = (typeof MODES)[number];

/**
 * The key of an upsert table: the Kafka record key (`'record-key'`, read into `_key` by
 * `keyFormat`), or declared fields of the value (`{ fields: ['tenant', 'id'] }`).
 */
export const upsertKey = z.union([
  z.literal('record-key'),
  z.strictObject({ fields: z.array(z.string().min(1)).min(1).max(8) }),
]);
export type UpsertKeySpec = z.output<typeof upsertKey>;

/**
 * How a value is read: as it is (`none`), or as a Debezium change event (`debezium`: `op`,
 * `before`, `after`, src/decode/debezium-envelope.ts).
 */
export const ENVELOPES = ['none', 'debezium'] as const;
export type Envelope = (typeof ENVELOPES)[number];

/** What a null value (tombstone) is: a dead letter, nothing to stage, or (upsert mode) its key's delete. */
export const TOMBSTONES = ['dead-letter', 'ignore', 'delete'] as const;
export type Tombstones = (typeof TOMBSTONES)[number];

/**
 * What a Debezium truncate (`op: 't'`) does: `dead-letter` (the default) sets it aside with
 * its reason and keeps the rows; `apply` deletes every row of its topic written before it (in
 * the publication's one commit, as delete rows: docs/design/upserts.md), for a definition of
 * one named topic of one partition only: a truncate has no key, so Kafka orders it against
 * its own partition's records alone.
 */
export const TRUNCATES = ['apply', 'dead-letter'] as const;
export type Truncates = (typeof TRUNCATES)[number];

/**
 * A source sequence that orders a key's records before their Kafka positions (a key moved
 * between partitions or topics, where Kafka has no order), staged in `_sequence`. Only
 * PostgreSQL's `source.lsn`: an integer that grows across the whole log. Other connectors'
 * positions are strings (Oracle's scn, SQL Server's change_lsn) or restart per file (MySQL's
 * pos), and would order nothing.
 */
export const SEQUENCES = ['source.lsn'] as const;
export type SourceSequence = (typeof SEQUENCES)[number];

/** The Debezium envelope's options of a consumer definition (consumer-definition.ts spreads them in). */
export const debeziumOptions = {
  /** What a truncate event does (`TRUNCATES`); absent: 'dead-letter'. */
  truncate: z.enum(TRUNCATES).optional(),
  /** The event's field whose integer orders a key's records (`SEQUENCES`). */
  sequence: z.enum(SEQUENCES).optional(),
};

/** The column a row's source sequence is staged and kept in (docs/design/upserts.md). */
export const SEQUENCE_COLUMN = '_sequence';

/** The declared fields with `_sequence` (a nullable int64) when the definition names a sequence. */
export function withSequenceColumn<F extends { readonly name: string }>(
  fields: F[] | undefined,
  sequence: string | undefined,
  column: F,
): F[] | undefined {
  return fields && sequence !== undefined ? [...fields, column] : fields;
}

/**
 * Column types a key field may have: Lance joins a merge on them by value and type, and a
 * BTREE indexes them. Floats (no exact equality), json (text of a value) and nested types
 * are refused.
 */
export const KEY_FIELD_TYPES: readonly string[] = [
  'string',
  'large_string',
  'int8',
  'int16',
  'int32',
  'int64',
  'uint8',
  'uint16',
  'uint32',
  'uint64',
  'date',
  'timestamp',
  'boolean',
  'binary',
];

/** The formats the Debezium envelope reads (src/decode/debezium-envelope.ts, debezium-registry.ts). */
const DEBEZIUM_FORMATS: readonly string[] = ['json', 'avro'];

/** Key formats whose `_key` is a column Lance can join on (a registry key is a struct). */
const RECORD_KEY_FORMATS: readonly KeyFormat[] = ['binary', 'string'];

export interface UpsertProblem {
  readonly path: readonly (string | number)[];
  readonly message: string;
}

interface UpsertDefinition {
  readonly mode: Mode;
  readonly envelope: Envelope;
  readonly format: string;
  readonly key?: UpsertKeySpec | undefined;
  readonly tombstones?: Tombstones | undefined;
  readonly truncate?: Truncates | undefined;
  readonly sequence?: string | undefined;
  readonly keyFormat: KeyFormat;
  readonly transform?: unknown;
  /** The topics: names and patterns (absent with `topicsRegex`). */
  readonly topics?: readonly (string | { readonly pattern: string })[] | undefined;
  /** Declared fields' type names by name; undefined for `schema: 'infer'`. */
  readonly fieldTypes: Readonly<Record<string, string>> | undefined;
}

/** The definition's problems with `mode`, `key` and `tombstones`, each naming its field. */
export function upsertProblems(def: UpsertDefinition): UpsertProblem[] {
  const problems: UpsertProblem[] = [];
  if (def.truncate !== undefined && def.envelope !== 'debezium')
    problems.push({
      path: ['truncate'],
      message: 'truncate is what a Debezium truncate event does: set envelope: "debezium" or remove truncate',
    });
  if (def.truncate === 'apply' && (def.topics?.length !== 1 || typeof def.topics[0] !== 'string'))
    problems.push({
      path: ['truncate'],
      message:
        'truncate "apply" deletes the rows of the truncate\'s topic, ordered by that topic\'s one partition: name exactly one topic in "topics" (no pattern, no topicsRegex), or use truncate: "dead-letter"',
    });
  if (def.sequence !== undefined) {
    if (def.envelope !== 'debezium')
      problems.push({
        path: ['sequence'],
        message:
          'sequence names a field of a Debezium change event (such as "source.lsn"): set envelope: "debezium"',
      });
    if (def.fieldTypes !== undefined && SEQUENCE_COLUMN in def.fieldTypes)
      problems.push({
        path: ['schema', 'fields', SEQUENCE_COLUMN],
        message: `"${SEQUENCE_COLUMN}" holds the source sequence: rename this field`,
      });
  }
  if (def.envelope === 'debezium') {
    if (!DEBEZIUM_FORMATS.includes(def.format))
      problems.push({
        path: ['envelope'],
        message: `"debezium" reads change events in JSON (Kafka Connect's JsonConverter) or Avro (an AvroConverter through the Schema Registry): format "json" or "avro", not "${def.format}"`,
      });
    // The AvroConverter writes keys as Avro too; a tombstone's key is read from them.
    if (def.format === 'avro' && def.keyFormat !== 'avro')
      problems.push({
        path: ['keyFormat'],
        message: `"debezium" with format "avro" reads the record keys (a tombstone's, a delete's without "before") as Avro through the registry, as the AvroConverter writes them: keyFormat "avro", not "${def.keyFormat}"`,
      });
    if (def.mode !== 'upsert' || def.key === 'record-key' || def.key === undefined)
      problems.push({
        path: ['envelope'],
        message:
          '"debezium" mirrors a table: mode "upsert" with key { fields: [...] }, the primary key\'s columns (a delete names them in "before" or the record key)',
      });
  }
  if (def.mode === 'append') {
    if (def.key !== undefined)
      problems.push({
        path: ['key'],
        message: 'a key is for mode "upsert": set mode: "upsert" or remove key',
      });
    if (def.tombstones === 'delete')
      problems.push({
        path: ['tombstones'],
        message: '"delete" deletes a key of an upsert table: set mode: "upsert" with key: "record-key"',
      });
    return problems;
  }
  if (def.key === undefined) {
    problems.push({
      path: ['key'],
      message: 'mode "upsert" needs a key: "record-key" (the Kafka key) or { fields: [...] }',
    });
    return problems;
  }
  if (def.key === 'record-key') {
    if (!RECORD_KEY_FORMATS.includes(def.keyFormat))
      problems.push({
        path: ['keyFormat'],
        message: `key "record-key" joins on _key, and keyFormat "${def.keyFormat}" makes it a struct, which a merge cannot join on: use "string" or "binary", or key: { fields: [...] }`,
      });
    return problems;
  }
  if (def.tombstones === 'delete' && def.envelope !== 'debezium')
    problems.push({
      path: ['tombstones'],
      message:
        'a tombstone has no value to read key fields from: "delete" needs key: "record-key" (use "dead-letter" or "ignore")',
    });
  if (def.transform !== undefined)
    problems.push({
      path: ['key'],
      message:
        'key fields with a transform: a transform may emit rows of several keys per record; give each its own record, or key: "record-key"',
    });
  const seen = new Set<string>();
  def.key.fields.forEach((name, i) => {
    if (seen.has(name)) problems.push({ path: ['key', 'fields', i], message: `"${name}" is named twice` });
    seen.add(name);
    if (def.fieldTypes === undefined) {
      // Avro Debezium events: the key's columns are the envelope's `after` record's, checked per
      // writer schema (src/decode/debezium-registry.ts).
      if (def.envelope === 'debezium' && def.format === 'avro') return;
      problems.push({
        path: ['key', 'fields', i],
        message: `key fields must be declared columns (schema.fields), with a type compared exactly: "${name}" would be inferred`,
      });
      return;
    }
    const type = def.fieldTypes[name];
    if (type === undefined)
      problems.push({ path: ['key', 'fields', i], message: `"${name}" is not a field of the schema` });
    else if (!KEY_FIELD_TYPES.includes(type))
      problems.push({
        path: ['key', 'fields', i],
        message: `"${name}" is ${type}: a key field is one of ${KEY_FIELD_TYPES.join(', ')}`,
      });
  });
  return problems;
}

/** The default of `tombstones`: a delete where a tombstone names its key, a dead letter otherwise. */
export function tombstonesOf(
  def: Pick<UpsertDefinition, 'mode' | 'key' | 'tombstones' | 'envelope'>,
): Tombstones {
  if (def.tombstones !== undefined) return def.tombstones;
  // Debezium follows each delete with a tombstone (for log compaction). On a compacted
  // topic the cleaner removes the `d` event and keeps the tombstone (for a while): a
  // replica reading later sees the delete only as the tombstone, its key in the record key.
  if (def.envelope === 'debezium') return 'delete';
  return def.mode === 'upsert' && def.key === 'record-key' ? 'delete' : 'dead-letter';
}
