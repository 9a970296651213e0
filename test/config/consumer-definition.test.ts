import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { ConfigError, loadConsumer, resolveConsumer } from '../../src/config';
import { defaultStagingWorkers } from '../../src/config/resolve';
import { tempDir } from '../support/rows';

const valid = { name: 'orders', topics: ['orders'], schema: { fields: { id: 'int64' } } };
const problems = (input: unknown, env: NodeJS.ProcessEnv = { KAFKA_BOOTSTRAP_SERVERS: 'b:9092' }) => {
  try {
    resolveConsumer(input, 'test.json', env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems.map((p) => p.field);
    throw error;
  }
  return [];
};

describe('consumer definitions', () => {
  test('defaults: group id, table, data dir, queue and staging bounds', () => {
    const c = resolveConsumer(valid, 'x', { KAFKA_BROKERS: 'a:1, b:2' });
    expect(c).toMatchObject({
      brokers: ['a:1', 'b:2'],
      groupId: 'kafka-lance-orders',
      table: 'orders',
      format: 'json',
      durabilityIntervalMs: 500,
      queue: { maxRecords: 50_000, maxBytes: 16 * 1024 * 1024 },
      staging: { maxPartAgeMs: 1_000, maxPartBytes: 16 * 1024 * 1024 },
      materializer: { maxPublicationBytes: 32 * 1024 * 1024, sourceReservationBytes: 128 * 1024 * 1024 },
      fields: [{ name: 'id', type: 'int64', nullable: true }],
    });
    expect(path.isAbsolute(c.dataDir)).toBe(true);
  });

  test('staging workers: the main thread on two cores or fewer, two threads above, and a named count always wins', () => {
    expect([1, 2, 3, 4, 64].map((cores) => defaultStagingWorkers(cores))).toEqual([0, 0, 2, 2, 2]);
    const env = { KAFKA_BROKERS: 'a:1' };
    expect(resolveConsumer(valid, 'x', env).workers).toBe(defaultStagingWorkers());
    expect(resolveConsumer({ ...valid, workers: 3 }, 'x', env).workers).toBe(3);
    expect(resolveConsumer({ ...valid, workers: 0 }, 'x', env).workers).toBe(0);
    expect(() => resolveConsumer({ ...valid, workers: -1 }, 'x', env)).toThrow(/workers/);
  });

  test('flags override the environment, which overrides the file', () => {
    const withBrokers = { ...valid, brokers: ['file:1'] };
    expect(resolveConsumer(withBrokers, 'x', {}).brokers).toEqual(['file:1']);
    expect(resolveConsumer(withBrokers, 'x', { KAFKA_BOOTSTRAP_SERVERS: 'env:1' }).brokers).toEqual([
      'env:1',
    ]);
    expect(
      resolveConsumer(withBrokers, 'x', { KAFKA_BOOTSTRAP_SERVERS: 'env:1' }, { brokers: ['flag:1'] })
        .brokers,
    ).toEqual(['flag:1']);
  });

  test.each([
    [{ ...valid, topics: undefined }, ['topics']],
    [{ ...valid, topicsRegex: 'o.*' }, ['topicsRegex']],
    [{ ...valid, topics: undefined, topicsRegex: '(' }, ['topicsRegex']],
    [{ ...valid, name: '9 bad' }, ['name']],
    [{ ...valid, schema: { fields: { id: 'uuid' } } }, ['schema.fields.id']],
    [{ ...valid, schema: { fields: { _offset: 'int64' } } }, ['schema.fields._offset']],
    [{ ...valid, schema: { fields: { 'a.b': 'int64' } } }, ['schema.fields.a.b']], // Lance refuses "."
    [{ ...valid, schema: { fields: { 'a`b': 'int64' } } }, ['schema.fields.a`b']],
    [{ ...valid, durabilityIntervalMs: 0 }, ['durabilityIntervalMs']],
    [{ ...valid, queue: { maxRecords: -1 } }, ['queue.maxRecords']],
    [{ ...valid, deadLetter: { topic: '' } }, ['deadLetter.topic']],
    [{ ...valid, deadLetter: { topic: 'dlq', compression: 'brotli' } }, ['deadLetter.compression']],
    [{ ...valid, unknownKnob: 1 }, ['(definition)']],
    [{ ...valid, eventTimeField: 'missing' }, ['eventTimeField']],
  ])('a bad definition fails with the field named (%#)', (input, fields) => {
    expect(problems(input)).toEqual(fields);
  });

  test('errors: tolerance defaults to a dead-letter ratio; bad values fail with the field named', () => {
    expect(resolveConsumer(valid, 'x', { KAFKA_BROKERS: 'a:1' }).errors).toEqual({
      tolerance: 'ratio',
      maxDeadLetterRatio: 0.5,
      window: 1_000,
      retryTimeoutMs: 60_000,
      retryDelayMaxMs: 10_000,
    });
    expect(problems({ ...valid, errors: { tolerance: 'some' } })).toEqual(['errors.tolerance']);
    expect(problems({ ...valid, errors: { maxDeadLetterRatio: 1.5 } })).toEqual([
      'errors.maxDeadLetterRatio',
    ]);
    expect(problems({ ...valid, errors: { maxDeadLetterRatio: 1 } })).toEqual(['errors.maxDeadLetterRatio']);
    expect(problems({ ...valid, errors: { tolerance: 'all', maxDeadLetterRatio: 1 } })).toEqual([]);
    expect(problems({ ...valid, errors: { window: 0 } })).toEqual(['errors.window']);
    expect(problems({ ...valid, errors: { retryTimeoutMs: -1 } })).toEqual(['errors.retryTimeoutMs']);
  });

  test('format avro: needs a registry, infers its columns from the writer schemas, takes no transform', () => {
    const avro = { name: 'orders', topics: ['orders'], schema: 'infer', format: 'avro' };
    const registry = { url: 'http://127.0.0.1:8081/apis/ccompat/v7/' };
    const c = resolveConsumer({ ...avro, schemaRegistry: registry }, 'x', { KAFKA_BROKERS: 'b:1' });
    // The trailing slash goes: ids are asked at `${url}/schemas/ids/<id>`.
    expect(c.schemaRegistry).toEqual({
      url: 'http://127.0.0.1:8081/apis/ccompat/v7',
      cacheTtlMs: 300_000,
      requestTimeoutMs: 10_000,
    });
    expect(problems(avro)).toEqual(['schemaRegistry']);
    expect(problems({ ...valid, schemaRegistry: registry })).toEqual(['schemaRegistry']);
    expect(problems({ ...avro, schemaRegistry: registry, schema: { fields: { id: 'int64' } } })).toEqual([
      'schema',
    ]);
    expect(problems({ ...avro, schemaRegistry: registry, transform: () => null })).toEqual(['transform']);
    expect(problems({ ...avro, schemaRegistry: { url: 'registry:8081' } })).toEqual(['schemaRegistry.url']);
    expect(problems({ ...avro, schemaRegistry: { ...registry, ssl: true } })).toEqual(['schemaRegistry.ssl']);
    expect(problems({ ...avro, schemaRegistry: { ...registry, cacheTtlMs: 10 } })).toEqual([
      'schemaRegistry.cacheTtlMs',
    ]);
    expect(problems({ ...avro, schemaRegistry: { ...registry, basicAuth: { username: '' } } })).toEqual([
      'schemaRegistry.basicAuth.username',
      'schemaRegistry.basicAuth.password',
    ]);
  });

  test('keyFormat: needs includeKey, and a registry key format needs a registry (also beside a json value)', () => {
    const registry = { url: 'http://127.0.0.1:8081' };
    const json = { name: 'orders', topics: ['orders'], schema: 'infer' };
    expect(resolveConsumer(json, 'x', { KAFKA_BROKERS: 'b:1' }).keyFormat).toBe('binary');
    expect(problems({ ...json, keyFormat: 'string' })).toEqual(['keyFormat']);
    expect(problems({ ...json, includeKey: true, keyFormat: 'string' })).toEqual([]);
    expect(problems({ ...json, includeKey: true, keyFormat: 'avro' })).toEqual(['schemaRegistry']);
    expect(problems({ ...json, includeKey: true, keyFormat: 'avro', schemaRegistry: registry })).toEqual([]);
    expect(problems({ ...json, includeKey: true, keyFormat: 'thrift' })).toEqual(['keyFormat']);
    for (const format of ['protobuf', 'json-schema']) {
      expect(problems({ ...json, format, schemaRegistry: registry })).toEqual([]);
      expect(problems({ ...json, format })).toEqual(['schemaRegistry']);
    }
  });

  test('no brokers anywhere names the field and the environment variables', () => {
    expect(() => resolveConsumer(valid, 'x', {})).toThrow(/brokers: .*KAFKA_BOOTSTRAP_SERVERS/);
  });

  test('version cleanup: 1 h by default, 0 keeps every version, and never shorter than 10 settle windows', () => {
    const env = { KAFKA_BOOTSTRAP_SERVERS: 'b:1' };
    expect(resolveConsumer(valid, 'x', env).materializer.cleanupOlderThanMs).toBe(3_600_000);
    expect(
      resolveConsumer({ ...valid, materializer: { cleanupOlderThanMs: 0 } }, 'x', env).materializer
        .cleanupOlderThanMs,
    ).toBe(0);
    expect(() =>
      resolveConsumer({ ...valid, materializer: { cleanupOlderThanMs: 5_000 } }, 'x', env),
    ).toThrow(/materializer\.cleanupOlderThanMs: 0 \(keep every version\) or at least 60000/);
    expect(new Set(problems({ ...valid, materializer: { cleanupOlderThanMs: -1 } }))).toEqual(
      new Set(['materializer.cleanupOlderThanMs']),
    );
    // The settle window and the option that tuned it are gone: naming it is an error.
    expect(() => resolveConsumer({ ...valid, lance: { commitSettleMs: 1_500 } }, 'x', env)).toThrow(
      /lance: Unrecognized key/,
    );
    expect(
      resolveConsumer({ ...valid, materializer: { cleanupOlderThanMs: 60_000 } }, 'x', env).materializer
        .cleanupOlderThanMs,
    ).toBe(60_000);
  });

  test('a source reservation below twice a publication (it would wait on itself) is refused, naming both fields', () => {
    const env = { KAFKA_BOOTSTRAP_SERVERS: 'b:1' };
    const MiB = 1024 * 1024;
    // 256 MiB publications with the default 256 MiB reservation: each part reserves 2× its bytes until the add.
    expect(() =>
      resolveConsumer({ ...valid, materializer: { maxPublicationBytes: 256 * MiB } }, 'x', env),
    ).toThrow(/materializer\.sourceReservationBytes: .*materializer\.maxPublicationBytes/);
    expect(() => resolveConsumer({ ...valid, staging: { maxPartBytes: 200 * MiB } }, 'x', env)).toThrow(
      /materializer\.sourceReservationBytes: .*staging\.maxPartBytes/,
    );
    const fits = { maxPublicationBytes: 256 * MiB, sourceReservationBytes: 512 * MiB };
    expect(resolveConsumer({ ...valid, materializer: fits }, 'x', env).materializer).toMatchObject(fits);
    // Nothing is published without the materializer: nothing to reserve.
    expect(() =>
      resolveConsumer(
        { ...valid, materializer: { enabled: false, maxPublicationBytes: 256 * MiB } },
        'x',
        env,
      ),
    ).not.toThrow();
  });

  test("offsets.commitAfter: 'staged' by default, 'published' only with a materializer, nothing else", () => {
    const env = { KAFKA_BOOTSTRAP_SERVERS: 'b:9092' };
    expect(resolveConsumer(valid, 'x', env).offsets).toEqual({ commitAfter: 'staged' });
    expect(
      resolveConsumer({ ...valid, offsets: { commitAfter: 'published' } }, 'x', env).offsets.commitAfter,
    ).toBe('published');
    expect(problems({ ...valid, offsets: { commitAfter: 'durable' } })).toEqual(['offsets.commitAfter']);
    expect(problems({ ...valid, offsets: { commitAfter: 'staged', later: true } })).toEqual(['offsets']);
    // Commits follow publications: without a materializer none would ever be made.
    expect(
      problems({ ...valid, offsets: { commitAfter: 'published' }, materializer: { enabled: false } }),
    ).toEqual(['offsets.commitAfter']);
  });

  test('a TypeScript definition file loads with its transform', async () => {
    const dir = await tempDir('kl-config');
    const file = path.join(dir, 'events.ts');
    await fsp.writeFile(
      file,
      `import { defineConsumer } from 'kafka-lance';
       const double = (n: number): number => n * 2;
       export default defineConsumer({ name: 'events', topics: ['e'], schema: 'infer',
         transform: (r) => ({ twice: double((r.value as { n: number }).n) }) });`,
    );
    const c = loadConsumer(file, { KAFKA_BOOTSTRAP_SERVERS: 'b:1' });
    expect(
      c.transform?.({ topic: 'e', partition: 0, offset: 0, timestamp: 0, key: null, value: { n: 21 } }),
    ).toEqual({
      twice: 42,
    });
    await fsp.writeFile(path.join(dir, 'broken.ts'), 'export default defineConsumer({');
    expect(() => loadConsumer(path.join(dir, 'broken.ts'), {})).toThrow(ConfigError);
    await fsp.rm(dir, { recursive: true, force: true });
  });

  test('numeric timestamps have an epoch unit: per consumer (default ms) and per timestamp field', () => {
    const env = { KAFKA_BOOTSTRAP_SERVERS: 'b:1' };
    expect(resolveConsumer(valid, 'x', env).epochUnit).toBe('ms');
    const c = resolveConsumer(
      { ...valid, epochUnit: 'us', schema: { fields: { at: { type: 'timestamp', epochUnit: 's' } } } },
      'x',
      env,
    );
    expect(c.epochUnit).toBe('us');
    expect(c.fields).toEqual([{ name: 'at', type: 'timestamp', nullable: true, epochUnit: 's' }]);
    expect(problems({ ...valid, epochUnit: 'minutes' })).toEqual(['epochUnit']);
    expect(problems({ ...valid, schema: { fields: { id: { type: 'int64', epochUnit: 's' } } } })).toEqual([
      'schema.fields.id.epochUnit',
    ]);
  });

  test('maxInferredColumns defaults to 256 and must be a positive integer', () => {
    const env = { KAFKA_BOOTSTRAP_SERVERS: 'b:1' };
    const inferred = { ...valid, schema: 'infer' };
    expect(resolveConsumer(inferred, 'x', env).maxInferredColumns).toBe(256);
    expect(resolveConsumer({ ...inferred, maxInferredColumns: 1000 }, 'x', env).maxInferredColumns).toBe(
      1000,
    );
    expect(problems({ ...inferred, maxInferredColumns: 0 })).toEqual(['maxInferredColumns']);
    expect(problems({ ...inferred, maxInferredColumns: 2.5 })).toEqual(['maxInferredColumns']);
  });
});
