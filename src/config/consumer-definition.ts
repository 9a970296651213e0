import { z } from 'zod';
import { clientOptions } from './client-options';
import { columnNameProblem } from './column-name';
import { deadLetter, errorHandling } from './dead-letter-options';
import { epochUnit, fieldSpec } from './field-spec';
import { FORMATS, KEY_FORMATS, REGISTRY_FORMATS, schemaRegistry } from './formats';
import { indexProblems, indexSpec } from './index-spec';
import { lanceOptions } from './lance-options';
import { materializerOptions } from './materializer-options';
import { metricsOptions } from './metrics-options';
import { isTableTemplate, tableTemplateProblem } from './table-name';
import type { Route } from './table-routing';
import type { Transform } from './transform';
import { ENVELOPES, MODES, TOMBSTONES, upsertKey, upsertProblems } from './upsert-options';
import { debeziumOptions } from './upsert-options';

/**
 * A consumer definition: what to read, how to decode it, where to stage and publish
 * it. One zod schema gives the TypeScript type, the defaults and the field-named
 * validation errors, so the three can never disagree.
 *
 * Names follow what Kafka Connect users know where they can: `topics` and
 * `topicsRegex` are mutually exclusive (`topics` / `topics.regex`), dead letters
 * carry Connect's `__connect.errors.*` headers, the group id defaults to
 * `kafka-lance-<name>` (Connect: `connect-<name>`).
 *
 * Each section with options of its own has its own module (field-spec.ts for declared
 * columns, formats.ts, dead-letter-options.ts, lance-options.ts, materializer-options.ts,
 * index-spec.ts); this one holds the definition's top level and the checks that span
 * sections.
 */

const IDENTIFIER = /^[A-Za-z][A-Za-z0-9_-]{0,127}$/;
const IDENTIFIER_RULE = 'letters, digits, "_" and "-", starting with a letter (at most 128)';
const identifier = z.string().regex(IDENTIFIER, IDENTIFIER_RULE);

const topicPattern = z
  .string()
  .min(1)
  .refine((s) => isValidRegex(s), 'not a valid regular expression');

/**
 * `table`: one table's name (as `name`), or a template holding `{topic}` whose filled-in
 * names are checked per topic (table-name.ts).
 */
const tableOption = z.string().superRefine((table, ctx) => {
  if (isTableTemplate(table)) {
    const problem = tableTemplateProblem(table);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  } else if (!IDENTIFIER.test(table)) {
    ctx.addIssue({ code: 'custom', message: `${IDENTIFIER_RULE}, or a template holding {topic}` });
  }
});

export const consumerDefinitionSchema = z
  .strictObject({
    name: identifier,
    brokers: z.array(z.string().min(1)).min(1).optional(),
    groupId: z.string().min(1).optional(),
    /** Topic names, and patterns (`{ pattern }`) matched against the broker's topics (see topicRefreshMs). */
    topics: z
      .array(z.union([z.string().min(1), z.strictObject({ pattern: topicPattern })]))
      .min(1)
      .optional(),
    /** One pattern: the same as `topics: [{ pattern }]` (Kafka Connect's `topics.regex`). */
    topicsRegex: topicPattern.optional(),
    /**
     * How often the broker's topic list is read again for patterns: a topic created later
     * that matches is consumed (from its earliest offset) within this long, and a deleted
     * one is let go.
     */
    topicRefreshMs: z.number().int().min(1_000).max(3_600_000).default(30_000),
    fromBeginning: z.boolean().default(true),
    format: z.enum(FORMATS).default('json'),
    schemaRegistry: schemaRegistry.optional(),
    table: tableOption.optional(),
    /**
     * The table of each record, decided before it is decoded (table-routing.ts): a name,
     * or undefined for `table`. An invalid name, or a throw, makes the record a dead letter
     * (invalid-table).
     */
    route: z.custom<Route>((v) => typeof v === 'function', 'must be a function').optional(),
    dataDir: z.string().min(1).optional(),
    schema: z.union([z.literal('infer'), z.strictObject({ fields: z.record(z.string().min(1), fieldSpec) })]),
    eventTimeField: z.string().min(1).optional(),
    /** Lance indexes the compacting replica builds and keeps fresh (src/config/index-spec.ts). */
    indexes: z.array(indexSpec).default([]),
    /**
     * `schema: 'infer'`: at most this many data columns. A record that would add more is
     * a dead letter (too-many-columns), so one wide record cannot make the table
     * thousands of columns wide. Map-like objects (many or unbounded keys) belong under
     * one key, which is inferred as a `json` column, or in a declared `json` field.
     */
    maxInferredColumns: z.number().int().min(1).max(10_000).default(256),
    /**
     * The unit of numeric timestamps (declared `timestamp` fields and `eventTimeField`):
     * epoch seconds, milliseconds, microseconds or nanoseconds. Strings are RFC 3339 /
     * ISO 8601, and a string without a zone is UTC (see src/decode/timestamp.ts).
     */
    epochUnit: epochUnit.default('ms'),
    includeKey: z.boolean().default(false),
    keyFormat: z.enum(KEY_FORMATS).default('binary'),
    transform: z.custom<Transform>((v) => typeof v === 'function', 'must be a function').optional(),
    maxRecordBytes: z
      .number()
      .int()
      .positive()
      .default(1024 * 1024),
    /**
     * What a null value (tombstone) is: a dead letter, nothing to stage, or (upsert mode
     * with key "record-key") the delete of its key. Absent: "delete" where a tombstone can
     * name its key, "dead-letter" otherwise (upsert-options.ts, `tombstonesOf`).
     */
    tombstones: z.enum(TOMBSTONES).optional(),
    /** 'append' (every record a row) or 'upsert' (one row per key: docs/upserts-and-cdc.md). */
    mode: z.enum(MODES).default('append'),
    /** Upsert mode: the Kafka record key ('record-key', read by keyFormat) or declared fields. */
    key: upsertKey.optional(),
    /** 'debezium': values are Debezium change events (docs/upserts-and-cdc.md). */
    envelope: z.enum(ENVELOPES).default('none'),
    ...debeziumOptions, // truncate, sequence: upsert-options.ts
    deadLetter: deadLetter.optional(),
    errors: errorHandling,
    durabilityIntervalMs: z.number().int().min(10).max(60_000).default(500),
    offsets: z
      .strictObject({
        /**
         * When an offset is committed: once the records below it are durable in staging
         * ('staged', default), or once the Lance publication holding them is durable
         * ('published': a lost data directory loses nothing; every publication is an
         * insert-if-absent on (_topic, _partition, _offset), DESIGN.md "Commit after
         * published"). All replicas of a group must use the same value.
         */
        commitAfter: z.enum(['staged', 'published']).default('staged'),
      })
      .prefault({}),
    queue: z
      .strictObject({
        maxRecords: z.number().int().positive().default(50_000),
        maxBytes: z
          .number()
          .int()
          .positive()
          .default(16 * 1024 * 1024),
      })
      .default({ maxRecords: 50_000, maxBytes: 16 * 1024 * 1024 }),
    staging: z
      .strictObject({
        maxPartBytes: z
          .number()
          .int()
          .positive()
          .default(16 * 1024 * 1024),
        maxPartAgeMs: z.number().int().positive().default(1_000),
        /**
         * Part files open at once in a replica (shared by its staging workers). Event
         * time opens one part per minute; past the bound the oldest part is sealed.
         */
        maxOpenParts: z.number().int().min(1).max(100_000).default(64),
        /**
         * Tables a staging lane of a routing consumer stages (a `{topic}` template or a
         * `route`): a record that names a table beyond them is a dead letter, so a route
         * gone wrong cannot make a directory per record.
         */
        maxTables: z.number().int().min(1).max(1_000_000).default(1_000),
      })
      .default({ maxPartBytes: 16 * 1024 * 1024, maxPartAgeMs: 1_000, maxOpenParts: 64, maxTables: 1_000 }),
    /**
     * Staging worker threads; 0 stages on the main thread. Absent: 0 on a machine of two
     * cores or fewer, else 2 (resolve.ts, `defaultStagingWorkers`).
     */
    workers: z.number().int().min(0).max(64).optional(),
    lance: lanceOptions,
    materializer: materializerOptions,
    metrics: metricsOptions,
    /** Group membership timing (kafkajs names). A crashed replica's partitions move after sessionTimeoutMs. */
    sessionTimeoutMs: z.number().int().min(1_000).default(30_000),
    heartbeatIntervalMs: z.number().int().min(100).default(3_000),
    rebalanceTimeoutMs: z.number().int().min(1_000).default(60_000),
    client: clientOptions,
  })
  .superRefine((def, ctx) => {
    if (!def.topics === !def.topicsRegex) {
      ctx.addIssue({
        code: 'custom',
        path: def.topics ? ['topicsRegex'] : ['topics'],
        message: 'set exactly one of "topics" and "topicsRegex"',
      });
    }
    // Without a transform, raw records are the fixed binary key/value columns. With one, the
    // transform turns the bytes into rows, which a declared schema may type (binary fields
    // take its Uint8Array values as they are, vectors its Float32Arrays).
    if (def.format === 'raw' && def.schema !== 'infer' && !def.transform) {
      ctx.addIssue({
        code: 'custom',
        path: ['schema'],
        message: 'format "raw" without a transform has a fixed schema (binary key and value): use "infer"',
      });
    }
    const registryFormat = (REGISTRY_FORMATS as readonly string[]).includes(def.format);
    const registryKey = (REGISTRY_FORMATS as readonly string[]).includes(def.keyFormat);
    if (registryFormat && !def.schemaRegistry) {
      ctx.addIssue({
        code: 'custom',
        path: ['schemaRegistry'],
        message: `format "${def.format}" reads writer schemas from a Schema Registry: set schemaRegistry.url`,
      });
    }
    if (registryKey && !def.schemaRegistry) {
      ctx.addIssue({
        code: 'custom',
        path: ['schemaRegistry'],
        message: `keyFormat "${def.keyFormat}" reads writer schemas from a Schema Registry: set schemaRegistry.url`,
      });
    }
    if (!registryFormat && !registryKey && def.schemaRegistry) {
      ctx.addIssue({
        code: 'custom',
        path: ['schemaRegistry'],
        message: `format "${def.format}" reads no Schema Registry: remove schemaRegistry or set format (or keyFormat) "avro", "protobuf" or "json-schema"`,
      });
    }
    // The Debezium envelope reads its record keys itself (a tombstone's key): keyFormat says how.
    if (
      def.keyFormat !== 'binary' &&
      !def.includeKey &&
      def.key !== 'record-key' &&
      def.envelope !== 'debezium'
    ) {
      ctx.addIssue({
        code: 'custom',
        path: ['keyFormat'],
        message: `keyFormat "${def.keyFormat}" says how the key becomes the _key column: set includeKey: true`,
      });
    }
    if (registryFormat && def.schema !== 'infer') {
      ctx.addIssue({
        code: 'custom',
        path: ['schema'],
        message: `format "${def.format}" takes its columns from the writer schemas in the registry: use "infer"`,
      });
    }
    if (registryFormat && def.transform) {
      ctx.addIssue({
        code: 'custom',
        path: ['transform'],
        message: `format "${def.format}" does not take a transform: the writer schema maps each record to one row`,
      });
    }
    if (def.schemaRegistry?.ssl && def.schemaRegistry.url.startsWith('http://')) {
      ctx.addIssue({
        code: 'custom',
        path: ['schemaRegistry', 'ssl'],
        message: 'ssl needs an https:// url',
      });
    }
    if (def.offsets.commitAfter === 'published' && (def.route || (def.table && isTableTemplate(def.table)))) {
      ctx.addIssue({
        code: 'custom',
        path: ['offsets', 'commitAfter'],
        message: `"published" waits for one table's publications, and ${def.route ? '"route"' : 'the "table" template'} names many tables: use "staged"`,
      });
    }
    if (def.offsets.commitAfter === 'published' && !def.materializer.enabled) {
      ctx.addIssue({
        code: 'custom',
        path: ['offsets', 'commitAfter'],
        message:
          '"published" commits only what this replica published into Lance, and materializer.enabled is false: nothing would ever be committed',
      });
    }
    if (def.materializer.enabled) {
      // A publication holds 2× its bytes (fetched + decoded) of the reservation until its
      // Lance add ends; it may be as large as maxPublicationBytes, or one part if a part is
      // larger. A smaller reservation could not bound memory (such a publication runs alone).
      const reservation = def.materializer.sourceReservationBytes;
      for (const [field, bytes] of [
        ['materializer.maxPublicationBytes', def.materializer.maxPublicationBytes],
        ['staging.maxPartBytes', def.staging.maxPartBytes],
      ] as const) {
        if (reservation < 2 * bytes) {
          ctx.addIssue({
            code: 'custom',
            path: ['materializer', 'sourceReservationBytes'],
            message: `${reservation} is less than 2 × ${field} (${2 * bytes}): a publication reserves twice its bytes until its Lance add ends; raise sourceReservationBytes or lower ${field}`,
          });
        }
      }
    }
    const fieldTypes =
      def.schema === 'infer'
        ? undefined
        : Object.fromEntries(
            Object.entries(def.schema.fields).map(([n, spec]) => [
              n,
              typeof spec === 'string' ? spec : spec.type,
            ]),
          );
    for (const problem of upsertProblems({ ...def, fieldTypes }))
      ctx.addIssue({ code: 'custom', path: [...problem.path], message: problem.message });
    for (const problem of indexProblems(def.indexes, def.schema === 'infer' ? undefined : def.schema.fields))
      ctx.addIssue({ code: 'custom', path: ['indexes', ...problem.path], message: problem.message });
    if (def.schema !== 'infer') {
      for (const name of Object.keys(def.schema.fields)) {
        const problem = columnNameProblem(name);
        if (problem !== undefined && !name.startsWith('_')) {
          ctx.addIssue({ code: 'custom', path: ['schema', 'fields', name], message: problem });
        }
        if (name.startsWith('_')) {
          ctx.addIssue({
            code: 'custom',
            path: ['schema', 'fields', name],
            message: 'names starting with "_" are reserved for kafka-lance columns',
          });
        }
      }
    }
  });

export type ConsumerDefinitionInput = z.input<typeof consumerDefinitionSchema>;
export type ConsumerDefinition = z.output<typeof consumerDefinitionSchema>;

/** Typed identity for `consumers/*.ts` files: `export default defineConsumer({...})`. */
export function defineConsumer(definition: ConsumerDefinitionInput): ConsumerDefinitionInput {
  return definition;
}

function isValidRegex(source: string): boolean {
  try {
    new RegExp(source);
    return true;
  } catch {
    return false;
  }
}
