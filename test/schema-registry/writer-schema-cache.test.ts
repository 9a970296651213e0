import {
  SchemaRegistryUnavailableError,
  type RegistryAnswer,
  type SchemaReference,
  type SchemaRegistryClient,
} from '../../src/schema-registry/registry-client';
import { MAX_REFERENCED_SCHEMAS } from '../../src/schema-registry/schema-references';
import {
  MAX_CACHED_SCHEMAS,
  MAX_CACHED_SCHEMA_BYTES,
  MAX_UNKNOWN_IDS,
  WriterSchemaCache,
} from '../../src/schema-registry/writer-schema-cache';

/** Ids from here on are unknown to the scripted registry (a producer churning schema ids). */
const CHURN = 1_000_000;

/**
 * The cache's rules, with a scripted registry in place of the HTTP client (the real
 * registry's answers are covered by test/integration/schema-registry-*.test.ts).
 */
class ScriptedRegistry {
  readonly asked: number[] = [];
  down = false;
  known = new Set<number>([1, 2]);
  /** References by id, and by "subject:version" for the referenced schemas themselves. */
  readonly references = new Map<number | string, SchemaReference[]>();
  readonly subjects = new Map<string, string>();
  readonly askedVersions: string[] = [];

  schemaById(id: number): Promise<RegistryAnswer> {
    this.asked.push(id);
    if (this.down) return Promise.reject(new SchemaRegistryUnavailableError('http://sr', id, 'ECONNREFUSED'));
    return Promise.resolve(
      this.known.has(id) || (id > 100 && id < CHURN)
        ? { found: true, schemaType: 'AVRO', schema: `"s${id}"`, references: this.references.get(id) ?? [] }
        : { found: false, message: 'not found' },
    );
  }

  schemaByVersion(subject: string, version: number, forId: number): Promise<RegistryAnswer> {
    const key = `${subject}:${version}`;
    this.askedVersions.push(key);
    if (this.down)
      return Promise.reject(new SchemaRegistryUnavailableError('http://sr', forId, 'ECONNREFUSED'));
    const schema = this.subjects.get(key);
    return Promise.resolve(
      schema === undefined
        ? { found: false, message: 'Subject not found' }
        : { found: true, schemaType: 'PROTOBUF', schema, references: this.references.get(key) ?? [] },
    );
  }
}

const ref = (name: string, subject = name, version = 1): SchemaReference => ({ name, subject, version });

function setup(ttlMs = 1_000) {
  const registry = new ScriptedRegistry();
  let now = 0;
  const cache = new WriterSchemaCache(registry as unknown as SchemaRegistryClient, ttlMs, () => now);
  return { registry, cache, advance: (ms: number) => (now += ms) };
}

test('an id is fetched once while it is fresh, and concurrent asks share one request', async () => {
  const { registry, cache } = setup();
  const [a, b] = await Promise.all([cache.get([1, 1]), cache.get([1])]);
  expect(a).toEqual([{ id: 1, schemaType: 'AVRO', schema: '"s1"' }]);
  expect(b).toEqual(a);
  await cache.get([1]);
  expect(registry.asked).toEqual([1]);
});

test('a schema past its time is fetched again, and kept as it is while the registry is down', async () => {
  const { registry, cache, advance } = setup();
  await cache.get([1]);
  advance(1_000);
  registry.down = true;
  expect(await cache.get([1])).toEqual([{ id: 1, schemaType: 'AVRO', schema: '"s1"' }]);
  expect(registry.asked).toEqual([1, 1]);
});

test('an unknown id is asked again after its time, and not reused while the registry is down', async () => {
  const { registry, cache, advance } = setup();
  expect(await cache.get([7])).toEqual([{ id: 7, unknown: 'not found' }]);
  await cache.get([7]);
  expect(registry.asked).toEqual([7]);
  advance(1_000);
  registry.down = true;
  await expect(cache.get([7])).rejects.toBeInstanceOf(SchemaRegistryUnavailableError);
  registry.down = false;
  registry.known.add(7);
  expect(await cache.get([7])).toEqual([{ id: 7, schemaType: 'AVRO', schema: '"s7"' }]);
});

test('a registry down with nothing cached rejects, so that the batch waits', async () => {
  const { registry, cache } = setup();
  registry.down = true;
  await expect(cache.get([1, 2])).rejects.toBeInstanceOf(SchemaRegistryUnavailableError);
});

test(`at most ${MAX_CACHED_SCHEMAS} ids are kept: the least recently used one is fetched again`, async () => {
  const { registry, cache } = setup(3_600_000);
  await cache.get([101]);
  for (let id = 102; id < 102 + MAX_CACHED_SCHEMAS - 1; id++) await cache.get([id]);
  await cache.get([101]); // used again: now the most recent
  await cache.get([5_000]); // evicts 102, the least recently used
  registry.asked.length = 0;
  await cache.get([101]);
  await cache.get([102]);
  expect(registry.asked).toEqual([102]);
});

test('a flood of unknown schema ids neither evicts the schemas in use nor is asked of the registry twice while fresh', async () => {
  const { registry, cache } = setup(3_600_000);
  await cache.get([1]);
  const churn = Array.from({ length: 2 * MAX_CACHED_SCHEMAS }, (_, i) => CHURN + i);
  expect((await cache.get(churn)).every((s) => 'unknown' in s)).toBe(true);
  registry.asked.length = 0;
  await cache.get([1, ...churn]);
  expect(registry.asked).toEqual([]);
});

test(`at most ${MAX_UNKNOWN_IDS} unknown ids are remembered: the least recently used one is asked again`, async () => {
  const { registry, cache } = setup(3_600_000);
  await cache.get(Array.from({ length: MAX_UNKNOWN_IDS + 1 }, (_, i) => CHURN + i));
  registry.asked.length = 0;
  await cache.get([CHURN + 1, CHURN]);
  expect(registry.asked).toEqual([CHURN]);
});

test('an id comes with the schemas it references and theirs in turn, each name once; a reference the registry lacks is kept as missing', async () => {
  const { registry, cache } = setup();
  registry.references.set(1, [ref('a.proto'), ref('b.proto'), ref('gone.proto')]);
  registry.references.set('a.proto:1', [ref('c.proto', 'c', 2)]);
  registry.references.set('b.proto:1', [ref('c.proto', 'c', 2)]);
  registry.subjects.set('a.proto:1', 'A').set('b.proto:1', 'B').set('c:2', 'C');
  expect(await cache.get([1])).toEqual([
    {
      id: 1,
      schemaType: 'AVRO',
      schema: '"s1"',
      references: [
        { name: 'a.proto', schema: 'A' },
        { name: 'b.proto', schema: 'B' },
        { name: 'gone.proto', missing: 'subject "gone.proto" version 1: Subject not found' },
        { name: 'c.proto', schema: 'C' },
      ],
    },
  ]);
  expect(registry.askedVersions).toEqual(['a.proto:1', 'b.proto:1', 'gone.proto:1', 'c:2']);
});

test('references that go on past the bound (a loop of subjects, each a new name) stop there as missing', async () => {
  const { registry, cache } = setup();
  registry.references.set(1, [ref('f0')]);
  for (let i = 0; i <= MAX_REFERENCED_SCHEMAS; i++) {
    registry.subjects.set(`f${i}:1`, `F${i}`);
    registry.references.set(`f${i}:1`, [ref(`f${i + 1}`)]);
  }
  const [schema] = await cache.get([1]);
  const references = (schema as unknown as { references: { name: string; missing?: string }[] }).references;
  expect(references).toHaveLength(MAX_REFERENCED_SCHEMAS + 1);
  expect(references.at(-1)).toEqual({
    name: `f${MAX_REFERENCED_SCHEMAS}`,
    missing: `more than ${MAX_REFERENCED_SCHEMAS} referenced schemas`,
  });
});

test('a registry that cannot give a reference rejects, so that the batch waits (not an unsupported schema)', async () => {
  const { registry, cache } = setup();
  registry.references.set(1, [ref('a.proto')]);
  const schemaByVersion = registry.schemaByVersion.bind(registry);
  registry.schemaByVersion = (subject, version, forId) => {
    registry.down = true;
    return schemaByVersion(subject, version, forId);
  };
  await expect(cache.get([1])).rejects.toBeInstanceOf(SchemaRegistryUnavailableError);
});

test('cached schemas are bounded by their text bytes too: large schemas evict the oldest before the count bound', async () => {
  const registry = new ScriptedRegistry();
  const text = `"${'x'.repeat(1024 * 1024)}"`;
  registry.schemaById = (id: number) => {
    registry.asked.push(id);
    return Promise.resolve({ found: true, schemaType: 'AVRO', schema: text, references: [] });
  };
  const cache = new WriterSchemaCache(registry as unknown as SchemaRegistryClient, 60_000, () => 0);
  const count = MAX_CACHED_SCHEMA_BYTES / (1024 * 1024) + 10;
  for (let id = 1; id <= count; id++) await cache.get([id]);
  expect(count).toBeLessThan(MAX_CACHED_SCHEMAS);
  await cache.get([count]);
  await cache.get([1]);
  // The newest stayed, the oldest was evicted (asked again).
  expect(registry.asked.filter((id) => id === count)).toHaveLength(1);
  expect(registry.asked.filter((id) => id === 1)).toHaveLength(2);
});
