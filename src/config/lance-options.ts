import { z } from 'zod';
import { secretString } from './secret';
import { OBJECT_STORE_SCHEMES, ddbTableNameOf, isObjectStoreUri, uriScheme } from './store-uri';

/** Where the Lance table lives: a directory (default <dataDir>/lance) or s3://, gs://, az:// with storageOptions. */
export const lanceOptions = z
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
    storageOptions: z.record(z.string().min(1), secretString()).optional(),
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
  .prefault({});
