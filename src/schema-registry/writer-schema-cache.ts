import { SchemaRegistryUnavailableError, type SchemaRegistryClient } from './registry-client';
import { referencedSchemas } from './schema-references';
import type { WriterSchema } from './wire-format';

/** At most this many schema ids are cached; the least recently used go first. */
export const MAX_CACHED_SCHEMAS = 1_000;

interface Entry {
  readonly schema: WriterSchema;
  readonly fetchedAt: number;
}

/**
 * Writer schemas by id, fetched from the registry once and kept (bounded, least recently
 * used first out) for `ttlMs`. A schema whose time is up is fetched again; while the
 * registry cannot be reached, the copy at hand is used (an id names one schema for good).
 * An id the registry said it does not know is asked again after `ttlMs` too, and is not
 * reused while the registry is unreachable: its records wait rather than be dead-lettered
 * on an old answer. Concurrent asks for one id share one request. An id's schema comes
 * with the schemas it references (schema-references.ts), fetched and kept with it.
 */
export class WriterSchemaCache {
  readonly #entries = new Map<number, Entry>();
  readonly #inFlight = new Map<number, Promise<WriterSchema>>();

  constructor(
    private readonly client: SchemaRegistryClient,
    private readonly ttlMs: number,
    private readonly clock: () => number = Date.now,
  ) {}

  /** What the registry holds for every id; rejects with SchemaRegistryUnavailableError when it cannot tell. */
  async get(ids: Iterable<number>): Promise<WriterSchema[]> {
    return Promise.all([...new Set(ids)].map((id) => this.#one(id)));
  }

  #one(id: number): Promise<WriterSchema> {
    const entry = this.#entries.get(id);
    if (entry && this.clock() - entry.fetchedAt < this.ttlMs) {
      this.#entries.delete(id);
      this.#entries.set(id, entry);
      return Promise.resolve(entry.schema);
    }
    let pending = this.#inFlight.get(id);
    if (!pending) {
      pending = this.#fetch(id, entry).finally(() => this.#inFlight.delete(id));
      this.#inFlight.set(id, pending);
    }
    return pending;
  }

  async #fetch(id: number, stale: Entry | undefined): Promise<WriterSchema> {
    let schema: WriterSchema;
    try {
      const answer = await this.client.schemaById(id);
      if (!answer.found) schema = { id, unknown: answer.message };
      else if (answer.references.length === 0)
        schema = { id, schemaType: answer.schemaType, schema: answer.schema };
      else
        schema = {
          id,
          schemaType: answer.schemaType,
          schema: answer.schema,
          references: await referencedSchemas(this.client, id, answer.references),
        };
    } catch (error) {
      if (error instanceof SchemaRegistryUnavailableError && stale && !('unknown' in stale.schema))
        return stale.schema;
      throw error;
    }
    this.#entries.delete(id);
    this.#entries.set(id, { schema, fetchedAt: this.clock() });
    while (this.#entries.size > MAX_CACHED_SCHEMAS) this.#entries.delete(this.#entries.keys().next().value!);
    return schema;
  }
}
