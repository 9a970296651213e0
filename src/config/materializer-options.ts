import { z } from 'zod';

/**
 * Version cleanup (materializer.cleanupOlderThanMs). One hour: time travel over the last
 * hour, and at most ~3,600 versions at one publication a second, which every compaction
 * reads (DESIGN.md, "Object storage"). LanceDB's own default is 7 days.
 */
export const DEFAULT_CLEANUP_OLDER_THAN_MS = 3_600_000;
export const MIN_CLEANUP_OLDER_THAN_MS = 60_000;

/** How staged parts become Lance publications, and the table's upkeep (compaction, indexes, version cleanup). */
export const materializerOptions = z
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
  .prefault({});
