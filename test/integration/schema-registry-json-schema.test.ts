import { promises as fsp } from 'node:fs';
import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import { brokerSuite } from '../support/broker-suite';
import { testBrokers } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';
import { plainColumn } from '../support/avro-fixtures';
import {
  EVERYTHING_JSON_ARROW_TYPES,
  EVERYTHING_JSON_EXPECTED,
  EVERYTHING_JSON_PAYLOADS,
  EVERYTHING_JSON_SCHEMA,
  jsonFramed,
} from '../support/json-schema-fixtures';
import {
  columnByOffset,
  deadLetters,
  expectColumns,
  expectPylanceColumns,
  lanceRows,
  produce,
  registryConsumer,
  roundTrip,
  withUnknownSchemaId,
} from '../support/registry-round-trip';
import { schemaRegistrySuite } from '../support/schema-registry-local';

/**
 * JSON Schema through the whole path: a real Apicurio registry, values from
 * @kafkajs/confluent-schema-registry's JSON serializer (and, for an integer beyond 2^53,
 * which that serializer cannot write exactly, the same framing by hand), a real broker
 * and a real replica process, the rows read back by LanceDB and by pylance.
 */
const suite = brokerSuite('kl-json-schema');
const registry = schemaRegistrySuite();
const subjectOf = (topic: string) => `${topic}-value`;
// The serializer's ajv would refuse `format` keywords it has no checker for (and warn of each).
const serializer = () =>
  new SchemaRegistry({ host: registry.url }, { [SchemaType.JSON]: { strict: false, logger: false } });

test('every mapped JSON Schema type lands in Lance with its value, read back by LanceDB and by pylance; each kind of bad value is a dead letter with its reason and the schema id', async () => {
  const sr = serializer();
  const consumer = await registryConsumer(suite, 'json-schema', registry.url);
  const { id } = await sr.register(
    { type: SchemaType.JSON, schema: JSON.stringify(EVERYTHING_JSON_SCHEMA) },
    { subject: subjectOf(consumer.topic) },
  );
  const second = await sr.encode(id, JSON.parse(EVERYTHING_JSON_PAYLOADS[1]) as object);
  // The serializer's framing is the header and the JSON text.
  expect(second).toEqual(jsonFramed(id, EVERYTHING_JSON_PAYLOADS[1]));
  await produce(suite, consumer.topic, [
    jsonFramed(id, EVERYTHING_JSON_PAYLOADS[0]),
    Buffer.from('{"not":"framed"}'),
    withUnknownSchemaId(second),
    jsonFramed(id, '{"i":1,'),
    jsonFramed(id, '{"i":1.5,"s":"x"}'),
    jsonFramed(id, '{"i":1,"s":""}'),
    second,
  ]);

  const { dataDir, rows, letters, exit } = await roundTrip(suite, consumer, 'kl-json-schema-replica', {
    rows: 2,
    letters: 5,
  });
  expect(exit).toEqual({ code: 0, signal: null });

  expect(rows.numRows).toBe(2);
  expect(plainColumn(rows, '_offset')).toEqual([0n, 6n]);
  expectColumns(rows, EVERYTHING_JSON_ARROW_TYPES, EVERYTHING_JSON_EXPECTED);
  expect(letters.map((l) => [l.offset, l.reason])).toEqual([
    [1, 'wrong-magic-byte'],
    [2, 'unknown-schema-id'],
    [3, 'undecodable-payload'],
    [4, 'schema-validation-failed'],
    [5, 'schema-validation-failed'],
  ]);
  expect(letters[1]!.detail).toMatch(/^schema id 2000000000: the registry has no such schema/);
  expect(letters[2]!.detail).toMatch(new RegExp(`^schema id ${id}: the payload is not JSON`));
  expect(letters[3]!.detail).toMatch(
    new RegExp(`^schema id ${id}: the writer schema rejects the payload: at /i must be integer`),
  );
  expect(letters[4]!.detail).toMatch(
    new RegExp(
      `^schema id ${id}: the writer schema rejects the payload: at /s must NOT have fewer than 1 characters`,
    ),
  );

  await expectPylanceColumns(dataDir, EVERYTHING_JSON_ARROW_TYPES, EVERYTHING_JSON_EXPECTED);
  await fsp.rm(dataDir, { recursive: true, force: true });
}, 180_000);

const LOG_V1 = {
  type: 'object',
  properties: { n: { type: 'integer' }, message: { type: 'string' } },
  required: ['n', 'message'],
  // A closed content model: the registry's BACKWARD rule takes a new optional property then
  // (with open ones, any new property narrows what the schema allows).
  additionalProperties: false,
};
const LOG_V2 = { ...LOG_V1, properties: { ...LOG_V1.properties, region: { type: ['string', 'null'] } } };

test('a second schema version mid-stream adds a nullable column to the table; values of both versions land', async () => {
  const sr = serializer();
  const consumer = await registryConsumer(suite, 'json-schema', registry.url);
  const subject = { subject: subjectOf(consumer.topic) };
  const v1 = (await sr.register({ type: SchemaType.JSON, schema: JSON.stringify(LOG_V1) }, subject)).id;
  await produce(suite, consumer.topic, [
    await sr.encode(v1, { n: 0, message: 'a' }),
    await sr.encode(v1, { n: 1, message: 'b' }),
  ]);
  const dataDir = await tempDir('kl-json-schema-evolution');
  const replica = new ReplicaProcess(consumer.file, dataDir, testBrokers());
  const first = await lanceRows(dataDir, 2);
  expect(first.schema.fields.map((f) => f.name)).not.toContain('region');

  const v2 = (await sr.register({ type: SchemaType.JSON, schema: JSON.stringify(LOG_V2) }, subject)).id;
  expect(v2).not.toBe(v1);
  await produce(suite, consumer.topic, [
    await sr.encode(v2, { n: 2, message: 'c', region: 'eu' }),
    await sr.encode(v1, { n: 3, message: 'd' }),
    await sr.encode(v2, { n: 4, message: 'e', region: null }),
  ]);
  const all = await lanceRows(dataDir, 5);
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  const column = (name: string) => columnByOffset(all, name);
  expect(column('n')).toEqual([0n, 1n, 2n, 3n, 4n]);
  expect(column('message')).toEqual(['a', 'b', 'c', 'd', 'e']);
  expect(column('region')).toEqual([null, null, 'eu', null, null]);
  expect(all.schema.fields.find((f) => f.name === 'region')?.nullable).toBe(true);
  expect(await deadLetters(suite, consumer)).toEqual([]);
  await fsp.rm(dataDir, { recursive: true, force: true });
}, 180_000);

test('a string key beside a JSON Schema value lands as a text _key', async () => {
  const sr = serializer();
  const consumer = await registryConsumer(suite, 'json-schema', registry.url, {
    includeKey: true,
    keyFormat: 'string',
  });
  const id = (
    await sr.register(
      { type: SchemaType.JSON, schema: JSON.stringify(LOG_V1) },
      { subject: subjectOf(consumer.topic) },
    )
  ).id;
  await produce(suite, consumer.topic, [
    { key: Buffer.from('user-ü'), value: await sr.encode(id, { n: 0, message: 'a' }) },
    { key: null, value: await sr.encode(id, { n: 1, message: 'b' }) },
  ]);
  const dataDir = await tempDir('kl-json-schema-keys');
  const replica = new ReplicaProcess(consumer.file, dataDir, testBrokers());
  const rows = await lanceRows(dataDir, 2);
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  expect(String(rows.schema.fields.find((f) => f.name === '_key')?.type)).toBe('Utf8');
  expect(plainColumn(rows, '_key')).toEqual(['user-ü', null]);
  expect(await deadLetters(suite, consumer)).toEqual([]);
  await fsp.rm(dataDir, { recursive: true, force: true });
}, 180_000);
