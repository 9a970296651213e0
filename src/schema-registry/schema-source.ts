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
  ) {
    this.#client = new SchemaRegistryClient(options);
    this.#cache = new WriterSchemaCache(this.#client, options.cacheTtlMs);
    metrics.schemaRegistryUnreachable.set(0);
  }

  /**
   * The writer schemas of every framed value (and, with `framedKeys`, key) in the batch
   * (those that are not framed get none: the worker dead-letters them), or undefined when
   * the batch stopped being wanted while the registry was unreachable.
   */
  async forBatch(
    messages: readonly { readonly value: Buffer | null; readonly key?: Buffer | null }[],
    control: WaitControl,
  ): Promise<WriterSchema[] | undefined> {
    const ids = new Set<number>();
    const add = (bytes: Buffer | null | undefined) => {
      if (bytes && bytes.length >= HEADER_BYTES && bytes[0] === MAGIC_BYTE) ids.add(bytes.readUInt32BE(1));
    };
    for (const m of messages) {
      add(m.value);
      if (this.framedKeys) add(m.key);
    }
    if (ids.size === 0) return [];
    for (let attempt = 0; ; attempt++) {
      try {
        const schemas = await this.#cache.get(ids);
        this.#reachable();
        return schemas;
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
