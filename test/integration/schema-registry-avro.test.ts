import { promises as fsp } from 'node:fs';
import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import { brokerSuite } from '../support/broker-suite';
import {
  deadLetters,
  expectColumns,
  expectPylanceColumns,
  lanceRows,
  produce,
  registryConsumer,
  roundTrip,
  until,
  withUnknownSchemaId,
} from '../support/registry-round-trip';
import { testBrokers } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';
import {
  EVERYTHING_ARROW_TYPES,
  EVERYTHING_EXPECTED,
  EVERYTHING_RECORDS,
  EVERYTHING_SCHEMA,
  plainColumn,
} from '../support/avro-fixtures';
import { schemaRegistrySuite } from '../support/schema-registry-local';

/**
 * Avro through the whole path: a real Apicurio registry (deploy/schema-registry-local),
 * producers using Confluent's serializer format (@kafkajs/confluent-schema-registry),
 * a real broker and a real replica process, the rows read back from Lance.
 */
const suite = brokerSuite('kl-avro');
const registry = schemaRegistrySuite();

const subjectOf = (topic: string) => `${topic}-value`;

test('every mapped Avro type lands in Lance with its value, read back by LanceDB and by pylance; a wrong magic byte, an unknown schema id and a truncated payload are dead letters with their reasons', async () => {
  const sr = new SchemaRegistry({ host: registry.url });
  const consumer = await registryConsumer(suite, 'avro', registry.url);
  const { id } = await sr.register(
    { type: SchemaType.AVRO, schema: JSON.stringify(EVERYTHING_SCHEMA) },
    { subject: subjectOf(consumer.topic) },
  );
  const good = await Promise.all(EVERYTHING_RECORDS.map((r) => sr.encode(id, r)));
  await produce(suite, consumer.topic, [
    good[0]!,
    Buffer.from('{"not":"avro"}'),
    withUnknownSchemaId(good[0]!),
    good[1]!.subarray(0, good[1]!.length - 3),
    good[1]!,
  ]);

  const { dataDir, rows, letters, exit } = await roundTrip(suite, consumer, 'kl-avro-replica', {
    rows: 2,
    letters: 3,
  });
  expect(exit).toEqual({ code: 0, signal: null });

  expect(rows.numRows).toBe(2);
  expect(plainColumn(rows, '_offset')).toEqual([0n, 4n]);
  expectColumns(rows, EVERYTHING_ARROW_TYPES, EVERYTHING_EXPECTED);
  expect(letters.map((l) => [l.offset, l.reason])).toEqual([
    [1, 'wrong-magic-byte'],
    [2, 'unknown-schema-id'],
    [3, 'undecodable-payload'],
  ]);
  expect(letters[1]!.detail).toMatch(/^schema id 2000000000: the registry has no such schema/);
  expect(letters[2]!.detail).toMatch(new RegExp(`^schema id ${id}: `));

  // pylance (qualify/.venv, the qualification's independent reader) reads the same values.
  await expectPylanceColumns(dataDir, EVERYTHING_ARROW_TYPES, EVERYTHING_EXPECTED);
  await fsp.rm(dataDir, { recursive: true, force: true });
}, 120_000);

const LOG_V1 = {
  type: 'record',
  name: 'Log',
  namespace: 'demo',
  fields: [
    { name: 'n', type: 'long' },
    { name: 'message', type: 'string' },
  ],
};
const LOG_V2 = {
  ...LOG_V1,
  fields: [...LOG_V1.fields, { name: 'region', type: ['null', 'string'], default: null }],
};

test('a second schema version mid-stream adds a nullable column to the table; records of both versions land, also after a restart', async () => {
  const sr = new SchemaRegistry({ host: registry.url });
  const consumer = await registryConsumer(suite, 'avro', registry.url);
  const subject = { subject: subjectOf(consumer.topic) };
  const v1 = (await sr.register({ type: SchemaType.AVRO, schema: JSON.stringify(LOG_V1) }, subject)).id;
  await produce(suite, consumer.topic, [
    await sr.encode(v1, { n: 0, message: 'a' }),
    await sr.encode(v1, { n: 1, message: 'b' }),
  ]);
  const dataDir = await tempDir('kl-avro-evolution');
  const replica = new ReplicaProcess(consumer.file, dataDir, testBrokers());
  const first = await lanceRows(dataDir, 2);
  expect(first.schema.fields.map((f) => f.name)).not.toContain('region');

  // The registry refuses an incompatible change (BACKWARD): this one is compatible.
  const v2 = (await sr.register({ type: SchemaType.AVRO, schema: JSON.stringify(LOG_V2) }, subject)).id;
  expect(v2).not.toBe(v1);
  await produce(suite, consumer.topic, [
    await sr.encode(v2, { n: 2, message: 'c', region: 'eu' }),
    await sr.encode(v1, { n: 3, message: 'd' }),
    await sr.encode(v2, { n: 4, message: 'e', region: null }),
  ]);
  await lanceRows(dataDir, 5);
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  // A restarted replica's decoder has seen no version 2 yet: its version-1 rows lack the
  // column the table has, and land with null there.
  await produce(suite, consumer.topic, [await sr.encode(v1, { n: 5, message: 'f' })]);
  const restarted = new ReplicaProcess(consumer.file, dataDir, testBrokers());
  const all = await lanceRows(dataDir, 6);
  expect(await restarted.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  const byOffset = [...plainColumn(all, '_offset').keys()].sort(
    (a, b) => Number(plainColumn(all, '_offset')[a]) - Number(plainColumn(all, '_offset')[b]),
  );
  const column = (name: string) => byOffset.map((i) => plainColumn(all, name)[i]);
  expect(column('n')).toEqual([0n, 1n, 2n, 3n, 4n, 5n]);
  expect(column('message')).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
  expect(column('region')).toEqual([null, null, 'eu', null, null, null]);
  expect(all.schema.fields.find((f) => f.name === 'region')?.nullable).toBe(true);
  expect(await deadLetters(suite, consumer)).toEqual([]);
  await fsp.rm(dataDir, { recursive: true, force: true });
}, 120_000);

test('a corrupted array or map block count (2^31 items, positive or negative) is a dead letter, and the records around it land', async () => {
  const schema = {
    type: 'record',
    name: 'Tagged',
    namespace: 'demo',
    fields: [
      { name: 'n', type: 'long' },
      { name: 'tags', type: { type: 'array', items: 'string' } },
      { name: 'counts', type: { type: 'map', values: 'long' } },
    ],
  };
  const sr = new SchemaRegistry({ host: registry.url });
  const consumer = await registryConsumer(suite, 'avro', registry.url);
  const { id } = await sr.register(
    { type: SchemaType.AVRO, schema: JSON.stringify(schema) },
    { subject: subjectOf(consumer.topic) },
  );
  const good = (n: number) => sr.encode(id, { n, tags: ['a', 'b'], counts: { x: n } });
  /** Avro's zig-zag varint of a safe integer. */
  const zigzag = (v: number) => {
    let u = v < 0 ? -2 * v - 1 : 2 * v;
    const out: number[] = [];
    while (u >= 128) {
      out.push((u % 128) | 128);
      u = Math.floor(u / 128);
    }
    return [...out, u];
  };
  const header = Buffer.alloc(5);
  header.writeUInt32BE(id, 1);
  const framed = (bytes: number[]) => Buffer.concat([header, Buffer.from(bytes)]);
  await produce(suite, consumer.topic, [
    await good(0),
    await good(1),
    framed([...zigzag(7), ...zigzag(2 ** 31), 2, 0x61, 0, 0]), // tags claims 2^31 strings
    await good(3),
    framed([...zigzag(7), 0, ...zigzag(-(2 ** 31)), ...zigzag(4), 2, 0x6b, 2, 0]), // counts: -2^31, a byte size
    await good(5),
    await good(6),
  ]);

  const dataDir = await tempDir('kl-avro-bomb-replica');
  const replica = new ReplicaProcess(consumer.file, dataDir, testBrokers());
  const rows = await lanceRows(dataDir, 5);
  const letters = await until(async () => {
    const l = await deadLetters(suite, consumer);
    return l.length >= 2 ? l : undefined;
  }, '2 dead letters');
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  expect(plainColumn(rows, 'n')).toEqual([0n, 1n, 3n, 5n, 6n]);
  expect(letters.map((l) => [l.offset, l.reason])).toEqual([
    [2, 'undecodable-payload'],
    [4, 'undecodable-payload'],
  ]);
  for (const l of letters)
    expect(l.detail).toMatch(
      new RegExp(
        `^schema id ${id}: .*a block count of 2147483648 items \\(at byte \\d+\\) where \\d+ bytes are left`,
      ),
    );
  await fsp.rm(dataDir, { recursive: true, force: true });
}, 120_000);
