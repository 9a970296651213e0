import { z } from 'zod';
import { COMPRESSION_NAMES } from './compression-names';

/** Where records that cannot be staged go, and when too many of them stop a partition. */

export const deadLetter = z.union([
  z.strictObject({
    topic: z.string().min(1),
    /** Add Connect's `__connect.errors.*` headers (errors.deadletterqueue.context.headers.enable). */
    contextHeaders: z.boolean().default(true),
    /** The codec of the dead letters' record batches (the Java producer's `compression.type`). */
    compression: z.enum(COMPRESSION_NAMES).default('none'),
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
export const errorHandling = z
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
