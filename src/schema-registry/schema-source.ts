import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import type { Metrics } from '../metrics/metrics';
import { SchemaRegistryUnavailableError, SchemaRegistryClient } from './registry-client';
import { WriterSchemaCache } from './writer-schema-cache';
import { HEADER_BYTES, MAGIC_BYTE, type WriterSchema } from './wire-format';
import type { SchemaRegistryOptions } from '../config';

/** How a batch's wait for the registry is kept honest: heartbeats, and when to give up. */
export interface WaitControl {
  /** Keeps the consumer's group membership (throws on a group change: that error leaves the wait). */
  readonly heartbeat: () => Promise<void>;
  /** False once the batch is no longer wanted (stopping, a new epoch): the wait ends with nothing. */
  readonly wanted: () => boolean;
  /** The longest pause between two heartbeats. */
  readonly heartbeatIntervalMs: number;
}

const MAX_BACKOFF_MS = 5_000;

/**
 * At most this many distinct schema ids are resolved for one batch. A fetch of header-only
 * records can carry tens of thousands of ids; resolving them all in one go outlasts any
 * session timeout on a slow registry and evicts its own earlier answers from the cache
 * (MAX_CACHED_SCHEMAS, MAX_UNKNOWN_IDS), so the batch would be fetched and asked for again
 * forever. Only the batch's prefix whose ids fit is admitted; the rest is fetched again
 * from right after it (nothing is dead-lettered for it). Below MAX_CACHED_SCHEMAS, so a
 * prefix's schemas all stay cached together.
 */
export const MAX_SCHEMA_IDS_PER_BATCH = 500;

/** The writer schemas of a batch's first `admitted` records (the prefix whose ids were resolved). */
export interface BatchSchemas {
  readonly schemas: WriterSchema[];
  /** How many of the batch's records (from its first) the schemas cover: admit those, fetch the rest again. */
  readonly admitted: number;
}

/**
 * The main thread's side of registry formats: before a batch goes to its staging
 * worker, the writer schemas of its schema ids are fetched (cached), so the workers
 * decode without a network call. A registry that cannot be reached is not bad input:
 * the batch waits, retried with backoff up to 5 s, and with it its partition (and the
 * fetches behind it); nothing is dead-lettered for it. An outage is one warning
 * (`schema-registry.unreachable`), `kafka_lance_schema_registry_unreachable` 1 meanwhile
 * and each failed request counted; its end is one info line.
 */
export class SchemaSource {
  readonly #client: SchemaRegistryClient;
  readonly #cache: WriterSchemaCache;
  #downSince: number | undefined;

  /** `framedKeys`: the keys are in a registry format too (`keyFormat`), their schemas fetched with the values'. */
  constructor(
    options: SchemaRegistryOptions,
    private readonly logger: Logger,
    private readonly metrics: Metrics,
    private readonly framedKeys = false,
    client: SchemaRegistryClient = new SchemaRegistryClient(options),
  ) {
    this.#client = client;
    this.#cache = new WriterSchemaCache(this.#client, options.cacheTtlMs);
    metrics.schemaRegistryUnreachable.set(0);
  }

  /**
   * The writer schemas of every framed value (and, with `framedKeys`, key) in the batch's
   * longest prefix holding at most MAX_SCHEMA_IDS_PER_BATCH distinct ids (those that are not
   * framed get none: the worker dead-letters them), or undefined when the batch stopped
   * being wanted while the registry was asked. The wait heartbeats, answered or not: a
   * slow registry is waited for like an unreachable one.
   */
  async forBatch(
    messages: readonly { readonly value: Buffer | null; readonly key?: Buffer | null }[],
    control: WaitControl,
  ): Promise<BatchSchemas | undefined> {
    const ids = new Set<number>();
    const idOf = (bytes: Buffer | null | undefined) =>
      bytes && bytes.length >= HEADER_BYTES && bytes[0] === MAGIC_BYTE ? bytes.readUInt32BE(1) : undefined;
    let admitted = 0;
    // Per record on the main thread: no array or set per record, only the batch's one set of ids.
    for (const m of messages) {
      const value = idOf(m.value);
      const key = this.framedKeys ? idOf(m.key) : undefined;
      const newValue = value !== undefined && !ids.has(value);
      const newKey = key !== undefined && key !== value && !ids.has(key);
      if (ids.size + (newValue ? 1 : 0) + (newKey ? 1 : 0) > MAX_SCHEMA_IDS_PER_BATCH) break;
      if (newValue) ids.add(value);
      if (newKey) ids.add(key);
      admitted++;
    }
    if (ids.size === 0) return { schemas: [], admitted };
    for (let attempt = 0; ; attempt++) {
      try {
        const schemas = await this.#heartbeatingUntil(this.#cache.get(ids), control);
        if (schemas === undefined) return undefined;
        this.#reachable();
        return { schemas, admitted };
      } catch (error) {
        if (!(error instanceof SchemaRegistryUnavailableError)) throw error;
        this.#unreachable(error);
      }
      const until = Date.now() + Math.min(MAX_BACKOFF_MS, 100 * 2 ** attempt);
      while (Date.now() < until) {
        if (!control.wanted()) return undefined;
        await control.heartbeat();
        await sleep(Math.min(control.heartbeatIntervalMs, until - Date.now()));
      }
      if (!control.wanted()) return undefined;
    }
  }

  /** The work's result, heartbeating every interval meanwhile; undefined once the batch is no longer wanted. */
  async #heartbeatingUntil<T>(work: Promise<T>, control: WaitControl): Promise<T | undefined> {
    // Settled or not, the work is not left rejecting unobserved when the wait ends first.
    work.catch(() => undefined);
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const tick = new Promise<'tick'>((resolve) => {
        timer = setTimeout(() => resolve('tick'), control.heartbeatIntervalMs);
      });
      try {
        const first = await Promise.race([work.then((value) => ({ value })), tick]);
        if (first !== 'tick') return first.value;
      } finally {
        clearTimeout(timer);
      }
      if (!control.wanted()) return undefined;
      await control.heartbeat();
    }
  }

  close(): void {
    this.#client.close();
  }

  #unreachable(error: SchemaRegistryUnavailableError): void {
    this.metrics.schemaRegistryErrors.inc();
    if (this.#downSince !== undefined) return;
    this.#downSince = Date.now();
    this.metrics.schemaRegistryUnreachable.set(1);
    this.logger.warn(
      { event: 'schema-registry.unreachable', url: this.#client.url, err: errorMessage(error) },
      'the schema registry cannot be reached: records wait for it (retrying), none is dead-lettered for it',
    );
  }

  #reachable(): void {
    if (this.#downSince === undefined) return;
    const waitedMs = Date.now() - this.#downSince;
    this.#downSince = undefined;
    this.metrics.schemaRegistryUnreachable.set(0);
    this.logger.info(
      { event: 'schema-registry.reachable', url: this.#client.url, waitedMs },
      'the schema registry answers again',
    );
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
