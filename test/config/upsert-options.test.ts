import { ConfigError, resolveConsumer } from '../../src/config';

const env = { KAFKA_BROKERS: 'b:9092' };
const base = {
  name: 'docs',
  topics: ['docs'],
  schema: { fields: { id: 'string', n: 'int64', score: 'float64' } },
};
const problems = (input: unknown): { field: string; message: string }[] => {
  try {
    resolveConsumer(input, 'test.json', env);
  } catch (error) {
    if (error instanceof ConfigError) return [...error.problems];
    throw error;
  }
  return [];
};

describe('mode and key', () => {
  test('append is the default: no key, tombstones are dead letters', () => {
    const c = resolveConsumer(base, 'x', env);
    expect(c).toMatchObject({ mode: 'append', tombstones: 'dead-letter', includeKey: false });
    expect(c.upsertKey).toBeUndefined();
  });

  test('upsert on the record key reads the key into _key and makes tombstones deletes', () => {
    const c = resolveConsumer({ ...base, mode: 'upsert', key: 'record-key', keyFormat: 'string' }, 'x', env);
    expect(c).toMatchObject({ mode: 'upsert', includeKey: true, tombstones: 'delete', upsertKey: ['_key'] });
  });

  test('upsert on declared fields: the key fields become non-nullable, tombstones stay dead letters', () => {
    const c = resolveConsumer({ ...base, mode: 'upsert', key: { fields: ['id', 'n'] } }, 'x', env);
    expect(c.upsertKey).toEqual(['id', 'n']);
    expect(c.tombstones).toBe('dead-letter');
    expect(c.fields!.filter((f) => !f.nullable).map((f) => f.name)).toEqual(['id', 'n']);
  });

  test.each([
    [{ mode: 'upsert' }, 'key', /needs a key/],
    [{ key: 'record-key' }, 'key', /for mode "upsert"/],
    [{ tombstones: 'delete' }, 'tombstones', /deletes a key of an upsert table/],
    [
      { mode: 'upsert', key: 'record-key', keyFormat: 'avro', schemaRegistry: { url: 'http://r:8081' } },
      'keyFormat',
      /struct/,
    ],
    [{ mode: 'upsert', key: { fields: ['missing'] } }, 'key.fields.0', /not a field of the schema/],
    [{ mode: 'upsert', key: { fields: ['score'] } }, 'key.fields.0', /float64/],
    [{ mode: 'upsert', key: { fields: ['id', 'id'] } }, 'key.fields.1', /named twice/],
    [
      { mode: 'upsert', key: { fields: ['id'] }, tombstones: 'delete' },
      'tombstones',
      /no value to read key fields from/,
    ],
    [{ mode: 'upsert', key: { fields: ['id'] }, schema: 'infer' }, 'key.fields.0', /would be inferred/],
  ])('%j is refused, naming %s', (extra, field, message) => {
    const found = problems({ ...base, ...extra });
    expect(found.map((p) => p.field)).toContain(field);
    expect(found.find((p) => p.field === field)!.message).toMatch(message);
  });
});

describe('envelope debezium', () => {
  const debezium = { ...base, mode: 'upsert', key: { fields: ['id'] }, envelope: 'debezium' };

  test("makes a tombstone its key's delete (the cleaner may have removed the delete event), and the non-key columns nullable", () => {
    const c = resolveConsumer(
      { ...debezium, schema: { fields: { id: 'int64', name: { type: 'string', nullable: false } } } },
      'x',
      env,
    );
    expect(c.tombstones).toBe('delete');
    expect(c.fields!.map((f) => [f.name, f.nullable])).toEqual([
      ['id', false],
      ['name', true],
    ]);
  });

  test('a sequence adds the nullable int64 column _sequence; a truncate is a dead letter by default (truncate unset)', () => {
    const c = resolveConsumer({ ...debezium, sequence: 'source.lsn' }, 'x', env);
    expect(c.fields!.find((f) => f.name === '_sequence')).toMatchObject({ type: 'int64', nullable: true });
    expect(c.sequence).toBe('source.lsn');
    expect(c.truncate).toBeUndefined();
  });

  test('Avro events through the registry take their key columns from the envelope schemas: key fields need no declared schema', () => {
    const c = resolveConsumer(
      {
        ...debezium,
        schema: 'infer',
        format: 'avro',
        keyFormat: 'avro',
        schemaRegistry: { url: 'http://registry:8081' },
        sequence: 'source.lsn',
      },
      'x',
      env,
    );
    expect(c.fields).toBeUndefined();
    expect(c.upsertKey).toEqual(['id']);
    expect(c.tombstones).toBe('delete');
  });

  test.each([
    [{ mode: 'append', key: undefined }, 'envelope', /mode "upsert" with key \{ fields/],
    // The AvroConverter's keys are Avro: a tombstone's key could not be read as JSON.
    [
      { format: 'avro', schema: 'infer', schemaRegistry: { url: 'http://registry:8081' } },
      'keyFormat',
      /keyFormat "avro"/,
    ],
    [
      {
        format: 'protobuf',
        keyFormat: 'protobuf',
        schema: 'infer',
        schemaRegistry: { url: 'http://registry:8081' },
      },
      'envelope',
      /format "json" or "avro"/,
    ],
    [{ key: 'record-key', keyFormat: 'string' }, 'envelope', /mode "upsert" with key \{ fields/],
    [{ format: 'raw', schema: 'infer' }, 'envelope', /format "json"/],
    [{ envelope: 'none', sequence: 'source.lsn' }, 'sequence', /envelope: "debezium"/],
    [{ envelope: 'none', truncate: 'apply' }, 'truncate', /envelope: "debezium"/],
    // Only PostgreSQL's LSN orders a key's records: Oracle's scn and SQL Server's change_lsn
    // are strings, MySQL's pos restarts per binlog file.
    [{ sequence: 'source.scn' }, 'sequence', /source\.lsn/],
    [{ sequence: 'source.pos' }, 'sequence', /source\.lsn/],
    // A truncate has no key: Kafka orders it against one partition of one topic only.
    [{ truncate: 'apply', topics: ['a', 'b'] }, 'truncate', /exactly one topic/],
    [{ truncate: 'apply', topics: undefined, topicsRegex: 'pg\\..*' }, 'truncate', /exactly one topic/],
    [
      { sequence: 'source.lsn', schema: { fields: { id: 'string', _sequence: 'int64' } } },
      'schema.fields._sequence',
      /rename this field/,
    ],
  ])('%j is refused, naming %s', (extra, field, message) => {
    const found = problems({ ...debezium, ...extra });
    expect(found.map((p) => p.field)).toContain(field);
    expect(found.find((p) => p.field === field)!.message).toMatch(message);
  });
});
