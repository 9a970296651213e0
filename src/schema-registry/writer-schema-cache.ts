import { SchemaRegistryUnavailableError, type SchemaRegistryClient } from './registry-client';
import { referencedSchemas } from './schema-references';
import { schemaTextBytes, type WriterSchema } from './wire-format';

/** At most this many schema ids are cached; the least recently used go first. */
export const MAX_CACHED_SCHEMAS = 1_000;
/**
 * And at most this many bytes of schema text (a schema may be 16 MiB: a count alone would let
 * 1,000 of them hold gigabytes). The schema just fetched stays whatever its size: its batch
 * needs it.
 */
export const MAX_CACHED_SCHEMA_BYTES = 64 * 1024 * 1024;
/**
 * At most this many ids the registry did not know are remembered as unknown, apart from the
 * schemas: a producer churning schema ids neither evicts the schemas in use nor makes the
 * replica ask the registry again for each id it was already told of.
 */
export const MAX_UNKNOWN_IDS = 10_000;

interface Entry {
  readonly schema: WriterSchema;
  readonly fetchedAt: number;
  readonly bytes: number;
}

/**
 * Writer schemas by id, fetched from the registry once and kept (bounded, least recently
 * used first out) for `ttlMs`. A schema whose time is up is fetched again; while the
 * registry cannot be reached, the copy at hand is used (an id names one schema for good).
 * An id the registry said it does not know is asked again after `ttlMs` too, and is not
 * reused while the registry is unreachable: its records wait rather than be dead-lettered
 * on an old answer. Unknown ids are kept in a bound of their own (MAX_UNKNOWN_IDS).
 * Concurrent asks for one id share one request. An id's schema comes with the schemas it
 * references (schema-references.ts), fetched and kept with it.
 */
export class WriterSchemaCache {
  readonly #entries = new Map<number, Entry>();
  readonly #unknown = new Map<number, Entry>();
  readonly #inFlight = new Map<number, Promise<WriterSchema>>();
  #bytes = 0;

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
    const map = this.#unknown.has(id) ? this.#unknown : this.#entries;
    const entry = map.get(id);
    if (entry && this.clock() - entry.fetchedAt < this.ttlMs) {
      map.delete(id);
      map.set(id, entry);
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
    this.#remove(this.#entries, id);
    this.#remove(this.#unknown, id);
    const [map, bound] =
      'unknown' in schema ? [this.#unknown, MAX_UNKNOWN_IDS] : [this.#entries, MAX_CACHED_SCHEMAS];
    const bytes = 'unknown' in schema ? 0 : schemaTextBytes(schema);
    map.set(id, { schema, fetchedAt: this.clock(), bytes });
    this.#bytes += bytes;
    while (
      map.size > bound ||
      (map === this.#entries && this.#bytes > MAX_CACHED_SCHEMA_BYTES && map.size > 1)
    )
      this.#remove(map, map.keys().next().value!);
    return schema;
  }

  #remove(map: Map<number, Entry>, id: number): void {
    const entry = map.get(id);
    if (!entry) return;
    map.delete(id);
    this.#bytes -= entry.bytes;
  }
}
