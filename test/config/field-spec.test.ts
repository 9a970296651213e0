import { ConfigError, defineConsumer, resolveConsumer } from '../../src/config';

/** Declared column types in a definition: what is accepted, normalized, and what is refused with the field named. */

const withFields = (fields: Record<string, unknown>) => ({
  name: 'docs',
  brokers: ['b:9092'],
  topics: ['docs'],
  schema: { fields },
});

function problems(fields: Record<string, unknown>): { field: string; message: string }[] {
  try {
    resolveConsumer(withFields(fields), 'test.json', {});
  } catch (error) {
    if (error instanceof ConfigError) return [...error.problems];
    throw error;
  }
  return [];
}

test('types with parameters are normalized, nested ones included, with their defaults', () => {
  const c = resolveConsumer(
    withFields({
      emb: { type: 'vector', dim: 768 },
      price: { type: 'decimal', precision: 10 },
      at: { type: 'timestamp', unit: 'us', timezone: 'UTC' },
      doc: {
        type: 'struct',
        fields: { title: 'string', tags: { type: 'list', items: { type: 'int8', nullable: false } } },
        nullable: false,
      },
    }),
    'x',
    {},
  );
  expect(c.fields).toEqual([
    { name: 'emb', type: 'vector', dim: 768, element: 'float32', nullable: true },
    { name: 'price', type: 'decimal', precision: 10, scale: 0, nullable: true },
    { name: 'at', type: 'timestamp', unit: 'us', timezone: 'UTC', nullable: true },
    {
      name: 'doc',
      type: 'struct',
      nullable: false,
      fields: [
        { name: 'title', type: 'string', nullable: true },
        { name: 'tags', type: 'list', nullable: true, items: { type: 'int8', nullable: false } },
      ],
    },
  ]);
});

test.each([
  [{ emb: { type: 'vector', dim: 4, element: 'int8' } }, 'schema.fields.emb.element'],
  [{ emb: { type: 'vector', dim: 0 } }, 'schema.fields.emb.dim'],
  [{ emb: { type: 'vector' } }, 'schema.fields.emb.dim'],
  [{ p: { type: 'decimal', precision: 39 } }, 'schema.fields.p.precision'],
  [{ p: { type: 'decimal', precision: 4, scale: 5 } }, 'schema.fields.p.scale'],
  [{ n: { type: 'int32', unit: 'us' } }, 'schema.fields.n.unit'],
  [{ n: { type: 'int32', epochUnit: 's' } }, 'schema.fields.n.epochUnit'],
  [{ t: { type: 'timestamp', timezone: 'Mars/Olympus' } }, 'schema.fields.t.timezone'],
  [{ l: { type: 'list', items: 'uuid' } }, 'schema.fields.l.items'],
  [{ s: { type: 'struct', fields: { 'a.b': 'string' } } }, 'schema.fields.s.fields.a.b'],
  [
    { s: { type: 'struct', fields: { a: { type: 'list', items: { type: 'vector', dim: -1 } } } } },
    'schema.fields.s.fields.a.items.dim',
  ],
  [{ m: { type: 'map' } }, 'schema.fields.m.type'],
])('a bad type is refused with its field named (%#)', (fields, field) => {
  expect(problems(fields).map((p) => p.field)).toEqual([field]);
});

test('timezones: IANA names and fixed offsets', () => {
  for (const timezone of ['UTC', 'Europe/Paris', '+02:00', '-11:30'])
    expect(problems({ t: { type: 'timestamp', timezone } })).toEqual([]);
});

test('defineConsumer types declared fields, nested ones included (a definition file type-checks)', () => {
  const definition = defineConsumer({
    name: 'docs',
    topics: ['docs'],
    schema: {
      fields: {
        embedding: { type: 'vector', dim: 384, element: 'float16' },
        doc: { type: 'struct', fields: { title: 'string', pages: { type: 'list', items: 'uint16' } } },
        price: { type: 'decimal', precision: 10, scale: 2, nullable: false },
        at: { type: 'timestamp', unit: 'us', timezone: 'UTC' },
      },
    },
  });
  expect(resolveConsumer({ ...definition, brokers: ['b:1'] }, 'x', {}).fields?.map((f) => f.type)).toEqual([
    'vector',
    'struct',
    'decimal',
    'timestamp',
  ]);
});
