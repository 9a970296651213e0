import { silentLogger } from '../../src/common/logger';
import type { SchemaRegistryOptions } from '../../src/config';
import { Metrics } from '../../src/metrics/metrics';
import type { RegistryAnswer, SchemaRegistryClient } from '../../src/schema-registry/registry-client';
import { MAX_SCHEMA_IDS_PER_BATCH, SchemaSource } from '../../src/schema-registry/schema-source';
import { MAX_CACHED_SCHEMAS, MAX_UNKNOWN_IDS } from '../../src/schema-registry/writer-schema-cache';

/**
 * A producer churning schema ids (one 1 MiB fetch of 5-byte header-only records holds
 * ~70,000 of them) against a slow registry: the batch's wait must heartbeat while the
 * registry answers, and each batch must resolve a bounded number of ids and move on,
 * so the replica neither outlasts its session nor asks for the same ids in a loop.
 */
class SlowRegistry {
  readonly asked: number[] = [];
  constructor(private readonly answerMs: number) {}

  async schemaById(id: number): Promise<RegistryAnswer> {
    this.asked.push(id);
    await new Promise((resolve) => setTimeout(resolve, this.answerMs));
    return { found: false, message: 'Schema not found' };
  }

  close(): void {}
}

const header = (id: number) => {
  const bytes = Buffer.alloc(5);
  bytes.writeUInt32BE(id, 1);
  return bytes;
};

function source(registry: SlowRegistry, framedKeys = false): SchemaSource {
  const options = { url: 'http://sr', cacheTtlMs: 60_000 } as SchemaRegistryOptions;
  return new SchemaSource(
    options,
    silentLogger(),
    new Metrics(),
    framedKeys,
    registry as unknown as SchemaRegistryClient,
  );
}

test('a batch of more distinct schema ids than the cache holds is resolved in bounded prefixes, each id asked once', async () => {
  const distinct = MAX_UNKNOWN_IDS + MAX_CACHED_SCHEMAS + 500;
  const registry = new SlowRegistry(0);
  const schemas = source(registry);
  let messages = Array.from({ length: distinct }, (_, i) => ({ value: header(i + 1), key: null }));
  const control = { heartbeat: () => Promise.resolve(), wanted: () => true, heartbeatIntervalMs: 50 };
  let batches = 0;
  while (messages.length > 0) {
    const answer = await schemas.forBatch(messages, control);
    expect(answer).toBeDefined();
    expect(answer!.admitted).toBeGreaterThan(0);
    expect(answer!.admitted).toBeLessThanOrEqual(MAX_SCHEMA_IDS_PER_BATCH);
    expect(answer!.schemas).toHaveLength(answer!.admitted);
    // What the batch runner does: admit the prefix, fetch the rest again from right after it.
    messages = messages.slice(answer!.admitted);
    batches++;
  }
  expect(batches).toBe(Math.ceil(distinct / MAX_SCHEMA_IDS_PER_BATCH));
  expect(registry.asked).toHaveLength(distinct);
  expect(new Set(registry.asked).size).toBe(distinct);
});

test('records repeating ids already in the prefix stay in it: the cap counts distinct ids', async () => {
  const registry = new SlowRegistry(0);
  const schemas = source(registry);
  const messages = Array.from({ length: 3 * MAX_SCHEMA_IDS_PER_BATCH }, (_, i) => ({
    value: header((i % MAX_SCHEMA_IDS_PER_BATCH) + 1),
  }));
  const control = { heartbeat: () => Promise.resolve(), wanted: () => true, heartbeatIntervalMs: 50 };
  const answer = await schemas.forBatch(messages, control);
  expect(answer!.admitted).toBe(messages.length);
});

test('the wait for a slow registry that does answer heartbeats the membership', async () => {
  const registry = new SlowRegistry(20);
  const schemas = source(registry);
  // 40 ids × 20 ms through the client's sockets (here one at a time): far longer than the interval.
  const messages = Array.from({ length: 40 }, (_, i) => ({ value: header(i + 1) }));
  let heartbeats = 0;
  const control = {
    heartbeat: () => {
      heartbeats++;
      return Promise.resolve();
    },
    wanted: () => true,
    heartbeatIntervalMs: 5,
  };
  const answer = await schemas.forBatch(messages, control);
  expect(answer!.admitted).toBe(40);
  expect(heartbeats).toBeGreaterThan(0);
});

test('a batch no longer wanted while a slow registry answers ends the wait with nothing', async () => {
  const registry = new SlowRegistry(200);
  const schemas = source(registry);
  let wanted = true;
  const control = {
    heartbeat: () => {
      wanted = false;
      return Promise.resolve();
    },
    wanted: () => wanted,
    heartbeatIntervalMs: 5,
  };
  expect(await schemas.forBatch([{ value: header(7) }], control)).toBeUndefined();
});

test("with framed keys the cap counts a record's key and value ids, once when they are the same id", async () => {
  const control = { heartbeat: () => Promise.resolve(), wanted: () => true, heartbeatIntervalMs: 50 };
  const last = MAX_SCHEMA_IDS_PER_BATCH - 1;
  // Records 0..last-1 bring MAX - 1 ids (key = value); then one record whose key and value are the
  // same new id (the prefix reaches MAX exactly), then one bringing two new ids (beyond it).
  const sameIds = Array.from({ length: last }, (_, i) => ({ value: header(i + 1), key: header(i + 1) }));
  const messages = [
    ...sameIds,
    { value: header(100_000), key: header(100_000) },
    { value: header(100_001), key: header(100_002) },
  ];
  const answer = await source(new SlowRegistry(0), true).forBatch(messages, control);
  expect(answer!.admitted).toBe(last + 1);
  // Without framed keys only the values' ids count: the same prefix (the last record's value is one id too many).
  const valuesOnly = await source(new SlowRegistry(0)).forBatch(messages, control);
  expect(valuesOnly!.admitted).toBe(last + 1);
  // A record whose key is new and value known: one id more.
  const keyed = await source(new SlowRegistry(0), true).forBatch(
    [...sameIds, { value: header(1), key: header(200_000) }, { value: header(1), key: header(200_001) }],
    control,
  );
  expect(keyed!.admitted).toBe(last + 1);
});
