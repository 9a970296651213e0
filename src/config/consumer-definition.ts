import { z } from 'zod';
import { columnNameProblem } from '../decode/column-name';
import { OBJECT_STORE_SCHEMES, ddbTableNameOf, isObjectStoreUri, uriScheme } from '../lance/store-config';
import { indexProblems, indexSpec } from './index-spec';

/**
 * A consumer definition: what to read, how to decode it, where to stage and publish
 * it. One zod schema gives the TypeScript type, the defaults and the field-named
 * validation errors, so the three can never disagree.
 *
 * Names follow what Kafka Connect users know where they can: `topics` and
 * `topicsRegex` are mutually exclusive (`topics` / `topics.regex`), dead letters
 * carry Connect's `__connect.errors.*` headers, the group id defaults to
 * `kafka-lance-<name>` (Connect: `connect-<name>`).
 */

/**
 * Column types a definition can declare by name; JSON values are converted into them
 * (src/decode/typed-codecs.ts says what each accepts). The first seven are also what
 * inference produces; the others are declared only.
 */
export const FIELD_TYPES = [
  'string',
  'int32',
  'int64',
  'float64',
  'boolean',
  'timestamp',
  'json',
  'float32',
  'int8',
  'int16',
  'uint8',
  'uint16',
  'uint32',
  'uint64',
  'date',
  'binary',
  'large_string',
  'large_binary',
] as const;
export type FieldTypeName = (typeof FIELD_TYPES)[number];

/** Types with parameters, declared as objects (`{ type: 'vector', dim: 768 }`). */
export const COMPOSITE_TYPES = ['vector', 'decimal', 'list', 'struct'] as const;
export type CompositeTypeName = (typeof COMPOSITE_TYPES)[number];

/**
 * Vector elements LanceDB 0.39 can search (measured: a nearest-neighbour query on a
 * FixedSizeList of each). Int8 is stored by Lance but refused by every query ("element
 * type Int8 and the query vector is Float32"), so it is not offered.
 */
export const VECTOR_ELEMENTS = ['float32', 'float16', 'uint8'] as const;
export type VectorElement = (typeof VECTOR_ELEMENTS)[number];
/** Lance's limit on a vector's dimension is far above this; a bound keeps a typo from allocating gigabytes. */
export const MAX_VECTOR_DIM = 65_536;
/** Decimal128: Arrow's and Lance's common decimal. */
export const MAX_DECIMAL_PRECISION = 38;

/** Units of numeric (epoch) timestamps, and of stored timestamps. */
export const EPOCH_UNITS = ['s', 'ms', 'us', 'ns'] as const;
export type EpochUnit = (typeof EPOCH_UNITS)[number];

/**
 * A declared column type, normalized (a bare type name is `{ type }`). Written out by
 * hand because list items and struct fields nest it: zod cannot infer a recursive
 * schema's type, so `fieldSpec` below is checked against these.
 */
export type DeclaredType =
  | { readonly type: Exclude<FieldTypeName, 'timestamp'> }
  | {
      readonly type: 'timestamp';
      /** The stored unit (Arrow Timestamp unit); ms when absent. */
      readonly unit?: EpochUnit;
      /** The stored zone (Arrow Timestamp timezone): metadata only, values are UTC instants. */
      readonly timezone?: string;
      /** The unit of this field's numbers: its `unit` when declared, else the consumer's `epochUnit`. */
      readonly epochUnit?: EpochUnit;
    }
  | { readonly type: 'vector'; readonly dim: number; readonly element: VectorElement }
  | { readonly type: 'decimal'; readonly precision: number; readonly scale: number }
  | { readonly type: 'list'; readonly items: DeclaredField }
  | { readonly type: 'struct'; readonly fields: readonly NamedField[] };
export type DeclaredField = DeclaredType & { readonly nullable: boolean };
export type NamedField = DeclaredField & { readonly name: string };

/** What a definition may write for one field (zod input). */
export type FieldSpecInput =
  | FieldTypeName
  | {
      type: FieldTypeName;
      nullable?: boolean;
      epochUnit?: EpochUnit;
      unit?: EpochUnit;
      timezone?: string;
    }
  | { type: 'vector'; dim: number; element?: VectorElement; nullable?: boolean }
  | { type: 'decimal'; precision: number; scale?: number; nullable?: boolean }
  | { type: 'list'; items: FieldSpecInput; nullable?: boolean }
  | { type: 'struct'; fields: Record<string, FieldSpecInput>; nullable?: boolean };

/** What the schema gives back for one field (zod output): defaults applied, not yet normalized. */
export type FieldSpecOutput =
  | FieldTypeName
  | {
      type: FieldTypeName;
      nullable: boolean;
      epochUnit?: EpochUnit | undefined;
      unit?: EpochUnit | undefined;
      timezone?: string | undefined;
    }
  | { type: 'vector'; dim: number; element: VectorElement; nullable: boolean }
  | { type: 'decimal'; precision: number; scale: number; nullable: boolean }
  | { type: 'list'; items: FieldSpecOutput; nullable: boolean }
  | { type: 'struct'; fields: Record<string, FieldSpecOutput>; nullable: boolean };

/**
 * Version cleanup (materializer.cleanupOlderThanMs). One hour: time travel over the last
 * hour, and at most ~3,600 versions at one publication a second, which every compaction
 * reads (DESIGN.md, "Object storage"). LanceDB's own default is 7 days.
 */
export const DEFAULT_CLEANUP_OLDER_THAN_MS = 3_600_000;
export const MIN_CLEANUP_OLDER_THAN_MS = 60_000;

const fieldType = z.enum(FIELD_TYPES);
const epochUnit = z.enum(EPOCH_UNITS);
const nullable = z.boolean().default(true);
const scalarSpec = z
  .strictObject({
    type: fieldType,
    nullable,
    /** The unit of this timestamp field's numbers; its `unit`, else the consumer's `epochUnit`, when absent. */
    epochUnit: epochUnit.optional(),
    /** The stored unit of a timestamp column (ms when absent). */
    unit: epochUnit.optional(),
    /** The stored zone of a timestamp column (an IANA name or ±hh:mm). */
    timezone: z
      .string()
      .min(1)
      .refine(isTimeZone, 'not a time zone: an IANA name (Europe/Paris, UTC) or an offset (+02:00)')
      .optional(),
  })
  .superRefine((spec, ctx) => {
    if (spec.type === 'timestamp') return;
    for (const key of ['epochUnit', 'unit', 'timezone'] as const) {
      if (spec[key] !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: [key],
          message: `only a timestamp field has ${key === 'epochUnit' ? 'an epoch unit' : `a ${key}`}`,
        });
    }
  });
const vectorSpec = z.strictObject({
  type: z.literal('vector'),
  dim: z.number().int().min(1).max(MAX_VECTOR_DIM),
  element: z
    .enum(VECTOR_ELEMENTS, {
      error: `one of ${VECTOR_ELEMENTS.join(', ')} (LanceDB 0.39 stores int8 vectors but no query can search them)`,
    })
    .default('float32'),
  nullable,
});
const decimalSpec = z
  .strictObject({
    type: z.literal('decimal'),
    precision: z.number().int().min(1).max(MAX_DECIMAL_PRECISION),
    scale: z.number().int().min(0).max(MAX_DECIMAL_PRECISION).default(0),
    nullable,
  })
  .superRefine((spec, ctx) => {
    if (spec.scale > spec.precision)
      ctx.addIssue({
        code: 'custom',
        path: ['scale'],
        message: `a scale above the precision (${spec.precision}) leaves no integer digits`,
      });
  });
const listSpec = z.strictObject({
  type: z.literal('list'),
  get items(): z.ZodType<FieldSpecOutput, FieldSpecInput> {
    return fieldSpec;
  },
  nullable,
});
const structSpec = z.strictObject({
  type: z.literal('struct'),
  get fields(): z.ZodType<Record<string, FieldSpecOutput>, Record<string, FieldSpecInput>> {
    return z.record(z.string().min(1), fieldSpec).superRefine((fields, ctx) => {
      for (const name of Object.keys(fields)) {
        const problem = columnNameProblem(name);
        if (problem !== undefined) ctx.addIssue({ code: 'custom', path: [name], message: problem });
      }
    });
  },
  nullable,
});
/** One field's declaration (exported for the README's types table, which parses its examples with it). */
export const fieldSpec: z.ZodType<FieldSpecOutput, FieldSpecInput> = z.union([
  fieldType,
  z.discriminatedUnion('type', [scalarSpec, vectorSpec, decimalSpec, listSpec, structSpec]),
]);

const identifier = z
  .string()
  .regex(
    /^[A-Za-z][A-Za-z0-9_-]{0,127}$/,
    'letters, digits, "_" and "-", starting with a letter (at most 128)',
  );

/** A record as a transform sees it. */
export interface SourceRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  /** Kafka timestamp, epoch milliseconds. */
  readonly timestamp: number;
  readonly key: Buffer | null;
  /**
   * The parsed JSON value (format `json`), or the raw bytes (format `raw`). Integer
   * literals beyond Number.MAX_SAFE_INTEGER are BigInt, exact (JSON.parse would round them).
   */
  readonly value: unknown;
}
export type Row = Record<string, unknown>;
export type Transform = (record: SourceRecord) => Row | readonly Row[] | null | undefined;

const deadLetter = z.union([
  z.strictObject({
    topic: z.string().min(1),
    /** Add Connect's `__connect.errors.*` headers (errors.deadletterqueue.context.headers.enable). */
    contextHeaders: z.boolean().default(true),
  }),
  z.strictObject({ file: z.string().min(1) }),
]);

/**
 * What to do when records are dead letters (Kafka Connect's `errors.*` settings).
 * `tolerance`: `all` (Connect's `errors.tolerance=all`) dead-letters every bad record
 * and goes on; `none` (Connect's default) stops a partition at its first bad record;
 * `ratio` (default) dead-letters bad records but stops a partition when more than
 * `maxDeadLetterRatio` of its last `window` records were dead letters — a definition
 * that matches nothing (a field name typed wrong) stops instead of dead-lettering
 * everything. A stopped partition is paused with its commits held below the first
 * offending record, until the replica restarts.
 */
const errorHandling = z
  .strictObject({
    tolerance: z.enum(['none', 'all', 'ratio']).default('ratio'),
    /** tolerance `ratio`: the share of dead letters (0 to 1, exclusive of 1) above which a partition stops. */
    maxDeadLetterRatio: z.number().min(0).max(1).default(0.5),
    /** tolerance `ratio`: how many of a partition's most recent records the share is measured over. */
    window: z.number().int().min(1).max(1_000_000).default(1_000),
    /**
     * How long a dead-letter write that fails with a transient error is retried
     * (Connect's `errors.retry.timeout`) before its partition stops. Errors no retry
     * can fix (too large for the topic, no such topic) stop it at once.
     */
    retryTimeoutMs: z.number().int().min(0).default(60_000),
    /** The longest wait between two retries (Connect's `errors.retry.delay.max.ms`). */
    retryDelayMaxMs: z.number().int().min(1).default(10_000),
  })
  .superRefine((errors, ctx) => {
    if (errors.tolerance === 'ratio' && errors.maxDeadLetterRatio === 1) {
      ctx.addIssue({
        code: 'custom',
        path: ['maxDeadLetterRatio'],
        message: 'a share of 1 never stops a partition: use tolerance "all" instead',
      });
    }
  })
  .prefault({});

/** Formats whose values are framed with a Schema Registry id (the Confluent wire format). */
export const REGISTRY_FORMATS = ['avro', 'protobuf', 'json-schema'] as const;
export const FORMATS = ['json', 'raw', ...REGISTRY_FORMATS] as const;
export type Format = (typeof FORMATS)[number];
/**
 * How `includeKey` reads the key into `_key` (Kafka Connect's key.converter beside the
 * value's `format`): its bytes, UTF-8 text, or a registry format (src/decode/key-column.ts).
 */
export const KEY_FORMATS = ['binary', 'string', ...REGISTRY_FORMATS] as const;
export type KeyFormat = (typeof KEY_FORMATS)[number];

/**
 * Where the writer schemas of the registry formats (`avro`, `protobuf`, `json-schema`) are fetched by id: a Confluent-compatible
 * Schema Registry (Confluent's, Apicurio's `/apis/ccompat/v7`, Karapace, Redpanda's).
 * Names as Confluent's serializers have them where they can: `url` is
 * `schema.registry.url` (one URL), `basicAuth` is `basic.auth.user.info` split in two.
 */
const schemaRegistry = z.strictObject({
  url: z
    .string()
    .regex(/^https?:\/\/[^/\s]+/, 'an http:// or https:// URL (the API base, e.g. http://host:8081)')
    .transform((u) => u.replace(/\/+$/, '')),
  basicAuth: z.strictObject({ username: z.string().min(1), password: z.string() }).optional(),
  /** https: `true` for the system's CAs, or PEM texts (`ca`, `cert`, `key`) and `rejectUnauthorized`. */
  ssl: z
    .union([
      z.boolean(),
      z.strictObject({
        ca: z.string().min(1).optional(),
        cert: z.string().min(1).optional(),
        key: z.string().min(1).optional(),
        rejectUnauthorized: z.boolean().optional(),
      }),
    ])
    .optional(),
  /** A schema fetched by id is fetched again after this long (an id the registry did not know too). */
  cacheTtlMs: z.number().int().min(1_000).default(300_000),
  /** One registry request fails (and is retried: the registry is unreachable) after this long. */
  requestTimeoutMs: z.number().int().min(100).max(120_000).default(10_000),
});
export type SchemaRegistryOptions = z.output<typeof schemaRegistry>;

const clientOptions = z
  .strictObject({
    clientId: z.string().optional(),
    ssl: z.union([z.boolean(), z.record(z.string(), z.unknown())]).optional(),
    sasl: z
      .object({ mechanism: z.enum(['plain', 'scram-sha-256', 'scram-sha-512', 'oauthbearer', 'aws']) })
      .passthrough()
      .optional(),
    connectionTimeout: z.number().int().positive().optional(),
    requestTimeout: z.number().int().positive().optional(),
  })
  .default({});

export const consumerDefinitionSchema = z
  .strictObject({
    name: identifier,
    brokers: z.array(z.string().min(1)).min(1).optional(),
    groupId: z.string().min(1).optional(),
    topics: z.array(z.string().min(1)).min(1).optional(),
    topicsRegex: z
      .string()
      .min(1)
      .refine((s) => isValidRegex(s), 'not a valid regular expression')
      .optional(),
    fromBeginning: z.boolean().default(true),
    format: z.enum(FORMATS).default('json'),
    schemaRegistry: schemaRegistry.optional(),
    table: identifier.optional(),
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
    /** What a null value (tombstone) is: a dead letter (default) or nothing to stage. */
    tombstones: z.enum(['dead-letter', 'ignore']).default('dead-letter'),
    deadLetter: deadLetter.optional(),
    errors: errorHandling,
    durabilityIntervalMs: z.number().int().min(10).max(60_000).default(1000),
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
        maxPartAgeMs: z.number().int().positive().default(2_000),
        /**
         * Part files open at once in a replica (shared by its staging workers). Event
         * time opens one part per minute; past the bound the oldest part is sealed.
         */
        maxOpenParts: z.number().int().min(1).max(100_000).default(64),
      })
      .default({ maxPartBytes: 16 * 1024 * 1024, maxPartAgeMs: 2_000, maxOpenParts: 64 }),
    workers: z.number().int().min(1).max(64).default(2),
    /** Where the Lance table lives: a directory (default <dataDir>/lance) or s3://, gs://, az:// with storageOptions. */
    lance: z
      .strictObject({
        uri: z
          .string()
          .min(1)
          .refine(
            (u) => {
              const scheme = uriScheme(u);
              return scheme === undefined || (OBJECT_STORE_SCHEMES as readonly string[]).includes(scheme);
            },
            `a local directory or ${OBJECT_STORE_SCHEMES.map((s) => `${s}://`).join(', ')}`,
          )
          .refine(
            (u) => !['s3', 's3+ddb', 'gs', 'az'].includes(uriScheme(u) ?? '') || /^[^:]+:\/\/[^/]+/.test(u),
            'names no bucket: use <scheme>://<bucket>/<prefix>',
          )
          .refine(
            (u) => uriScheme(u) !== 's3+ddb' || ddbTableNameOf(u) !== undefined,
            's3+ddb:// names its DynamoDB commit table in the query: s3+ddb://<bucket>/<prefix>?ddbTableName=<table> (3 to 255 characters of a-z, A-Z, 0-9, _ . -)',
          )
          .optional(),
        /**
         * LanceDB / object_store options (endpoint, region, aws_access_key_id,
         * aws_secret_access_key, allow_http, ...). Values are strings; secret ones are
         * never logged. The AWS_* environment variables are read too.
         */
        storageOptions: z.record(z.string().min(1), z.string()).optional(),
        /**
         * Whether concurrent Lance commits on this store are atomic (put-if-absent):
         * 'probe' (default) races concurrent appends at start; 'atomic' trusts the operator.
         * Several writers need atomic commits (see DESIGN.md "Object storage").
         */
        commits: z.enum(['probe', 'atomic']).default('probe'),
        /**
         * The operator declares this replica the table's only writer: it publishes on a
         * store without atomic commits (one writer cannot lose a commit to another),
         * where it would otherwise refuse.
         */
        singleWriter: z.boolean().default(false),
        /** The start check (connect + list) of an object store fails after this long. */
        connectTimeoutMs: z.number().int().min(500).max(120_000).default(10_000),
      })
      .superRefine((lance, ctx) => {
        if (lance.storageOptions && !isObjectStoreUri(lance.uri ?? '')) {
          ctx.addIssue({
            code: 'custom',
            path: ['storageOptions'],
            message:
              'storageOptions apply to an object-store uri (s3://, gs://, az://); lance.uri is a local directory',
          });
        }
      })
      .prefault({}),
    materializer: z
      .strictObject({
        /** Publish into Lance (false: stage and commit only). */
        enabled: z.boolean().default(true),
        /** false: buffered (prepare all, then write); true: streamed (prepare the next while one writes). */
        pipelinePreparation: z.boolean().default(false),
        maxPublicationBytes: z
          .number()
          .int()
          .positive()
          .default(32 * 1024 * 1024),
        /** A small publication waits at most this long for more parts (freshness bound). */
        maxPublicationDelayMs: z.number().int().min(0).default(2_000),
        fetchPermits: z.number().int().min(1).max(64).default(2),
        decodePermits: z.number().int().min(1).max(64).default(2),
        /** Bytes of fetched + decoded source data in flight: a publication holds 2× its bytes until its add ends (at least 2 × maxPublicationBytes and 2 × staging.maxPartBytes). */
        sourceReservationBytes: z
          .number()
          .int()
          .positive()
          .default(128 * 1024 * 1024),
        pollMs: z.number().int().min(10).default(1_000),
        /**
         * Compact small fragments (LanceDB optimize) this often; 0 turns it off. Only the
         * replica that owns the first partition of the first topic runs it.
         */
        optimizeEveryMs: z.number().int().min(0).default(300_000),
        /**
         * Build and update the declared `indexes` this often (the replica that compacts, in
         * the background); 0 turns it off.
         */
        indexEveryMs: z.number().int().min(0).default(30_000),
        /**
         * Each compaction also removes the table versions that stopped being the latest
         * this long ago (and the files only they used); 0 keeps every version (see
         * DESIGN.md "Object storage").
         */
        cleanupOlderThanMs: z
          .number()
          .int()
          .min(0)
          .refine(
            (ms) => ms === 0 || ms >= MIN_CLEANUP_OLDER_THAN_MS,
            `0 (keep every version) or at least ${MIN_CLEANUP_OLDER_THAN_MS} ms: a query that reads a removed version fails`,
          )
          .default(DEFAULT_CLEANUP_OLDER_THAN_MS),
      })
      .prefault({}),
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
    if (def.keyFormat !== 'binary' && !def.includeKey) {
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

/** An IANA zone Intl knows, or a fixed offset: what Arrow readers accept as a timestamp's timezone. */
function isTimeZone(zone: string): boolean {
  if (/^[+-](?:[01]\d|2[0-3]):[0-5]\d$/.test(zone)) return true;
  try {
    new Intl.DateTimeFormat('en', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

function isValidRegex(source: string): boolean {
  try {
    new RegExp(source);
    return true;
  } catch {
    return false;
  }
}
