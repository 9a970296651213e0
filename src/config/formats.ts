import { z } from 'zod';
import { secretString, type WithSecretsResolved } from './secret';

/** How record values and keys are encoded, and the Schema Registry the registry formats read. */

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
export const schemaRegistry = z.strictObject({
  url: z
    .string()
    .regex(/^https?:\/\/[^/\s]+/, 'an http:// or https:// URL (the API base, e.g. http://host:8081)')
    .transform((u) => u.replace(/\/+$/, '')),
  basicAuth: z
    .strictObject({ username: secretString(z.string().min(1)), password: secretString() })
    .optional(),
  /** https: `true` for the system's CAs, or PEM texts (`ca`, `cert`, `key`) and `rejectUnauthorized`. */
  ssl: z
    .union([
      z.boolean(),
      z.strictObject({
        ca: secretString(z.string().min(1)).optional(),
        cert: secretString(z.string().min(1)).optional(),
        key: secretString(z.string().min(1)).optional(),
        rejectUnauthorized: z.boolean().optional(),
      }),
    ])
    .optional(),
  /** A schema fetched by id is fetched again after this long (an id the registry did not know too). */
  cacheTtlMs: z.number().int().min(1_000).default(300_000),
  /** One registry request fails (and is retried: the registry is unreachable) after this long. */
  requestTimeoutMs: z.number().int().min(100).max(120_000).default(10_000),
});
/** With its secret references read (resolve.ts). */
export type SchemaRegistryOptions = WithSecretsResolved<z.output<typeof schemaRegistry>>;
