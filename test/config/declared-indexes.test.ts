import { ConfigError, resolveConsumer } from '../../src/config';
import { indexName, vectorMinRows } from '../../src/config/index-spec';

/** Declared indexes are checked at start against the declared columns, each error naming its field. */

const definition = (indexes: unknown[], schema: unknown = undefined) => ({
  name: 'docs',
  brokers: ['b:9092'],
  topics: ['docs'],
  schema: schema ?? {
    fields: {
      emb: { type: 'vector', dim: 32 },
      codes: { type: 'vector', dim: 8, element: 'uint8' },
      service: 'string',
      tags: { type: 'list', items: 'string' },
      body: 'json',
    },
  },
  indexes,
});

function problems(indexes: unknown[], schema?: unknown): { field: string; message: string }[] {
  try {
    resolveConsumer(definition(indexes, schema), 'test.json', {});
  } catch (error) {
    if (error instanceof ConfigError) return [...error.problems];
    throw error;
  }
  return [];
}

test('well-formed indexes are accepted with their defaults', () => {
  const c = resolveConsumer(
    definition([
      { column: 'emb', type: 'ivf_pq', metric: 'cosine', numPartitions: 4, numSubVectors: 4 },
      { column: 'service', type: 'bitmap' },
      { column: 'tags', type: 'label_list', name: 'tag_labels' },
    ]),
    'x',
    {},
  );
  expect(c.indexes[0]).toEqual({
    column: 'emb',
    type: 'ivf_pq',
    metric: 'cosine',
    numPartitions: 4,
    numSubVectors: 4,
    retrainShare: 0.5,
  });
  expect(c.indexes.map(indexName)).toEqual(['emb_idx', 'service_idx', 'tag_labels']);
  expect(c.materializer.indexEveryMs).toBe(30_000);
});

test('a vector index trains on 256 rows per declared partition, else 4096, unless minRows says', () => {
  const [a, b, c] = resolveConsumer(
    definition([
      { column: 'emb', type: 'ivf_pq', numPartitions: 4 },
      { column: 'service', type: 'btree' },
      { column: 'tags', type: 'label_list' },
    ]),
    'x',
    {},
  ).indexes;
  expect(a && 'metric' in a && vectorMinRows(a)).toBe(1_024);
  expect([b?.type, c?.type]).toEqual(['btree', 'label_list']);
  const [d] = resolveConsumer(definition([{ column: 'emb', type: 'ivf_flat' }]), 'x', {}).indexes;
  expect(d && 'metric' in d && vectorMinRows(d)).toBe(4_096);
  const [e] = resolveConsumer(
    definition([{ column: 'emb', type: 'ivf_hnsw_sq', minRows: 300 }]),
    'x',
    {},
  ).indexes;
  expect(e && 'metric' in e && vectorMinRows(e)).toBe(300);
});

test('an index on a column of the wrong type, an undeclared column or a second index on one column is refused, naming the field', () => {
  /** The only problem, as `field: message`. */
  const only = (indexes: unknown[], schema?: unknown): string => {
    const found = problems(indexes, schema);
    expect(found).toHaveLength(1);
    return `${found[0]?.field}: ${found[0]?.message}`;
  };
  expect(only([{ column: 'service', type: 'ivf_pq' }])).toContain(
    'indexes.0.type: a ivf_pq index needs a vector column; "service" is string',
  );
  expect(only([{ column: 'nope', type: 'btree' }])).toContain(
    'indexes.0.column: "nope" is not a declared field',
  );
  expect(only([{ column: 'emb', type: 'bitmap' }])).toMatch(/^indexes\.0\.type: .*"emb" is vector/);
  expect(only([{ column: 'body', type: 'fts' }])).toMatch(/^indexes\.0\.type: .*"body" is json/);
  expect(only([{ column: 'codes', type: 'ivf_flat' }])).toMatch(/^indexes\.0\.type: .*float32 or float16/);
  expect(only([{ column: 'emb', type: 'ivf_pq', numSubVectors: 5 }])).toContain(
    'indexes.0.numSubVectors: 5 does not divide the dimension of "emb" (32)',
  );
  expect(
    only([
      { column: 'service', type: 'btree' },
      { column: 'service', type: 'bitmap', name: 'again' },
    ]),
  ).toContain('indexes.1.column: "service" already has an index (indexes.0)');
  expect(only([{ column: 'emb', type: 'ivf_pq' }], 'infer')).toContain(
    'indexes.0.column: indexes need declared columns',
  );
});

test('unknown index types, metrics and options are refused by the schema', () => {
  expect(problems([{ column: 'emb', type: 'ivf_sq' }])[0]?.field).toMatch(/^indexes\.0/);
  expect(problems([{ column: 'emb', type: 'ivf_pq', metric: 'hamming' }])[0]?.field).toBe('indexes.0.metric');
  expect(problems([{ column: 'service', type: 'btree', metric: 'l2' }])[0]?.field).toMatch(/^indexes\.0/);
  expect(problems([{ column: 'emb', type: 'ivf_pq', retrainShare: 0 }])[0]?.field).toBe(
    'indexes.0.retrainShare',
  );
});
