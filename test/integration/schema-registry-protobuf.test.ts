import { promises as fsp } from 'node:fs';
import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import * as protobuf from 'protobufjs';
import { brokerSuite } from '../support/broker-suite';
import { testBrokers } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';
import { plainColumn } from '../support/avro-fixtures';
import {
  EVERYTHING_INDEXES,
  EVERYTHING_MESSAGES,
  EVERYTHING_PROTO,
  EVERYTHING_PROTO_ARROW_TYPES,
  EVERYTHING_PROTO_EXPECTED,
  protobufFramed,
} from '../support/protobuf-fixtures';
import {
  columnByOffset,
  deadLetters,
  expectColumns,
  expectPylanceColumns,
  lanceRows,
  produce,
  pylanceRows,
  registryConsumer,
  roundTrip,
  until,
  withUnknownSchemaId,
} from '../support/registry-round-trip';
import { schemaRegistrySuite } from '../support/schema-registry-local';

/**
 * Protobuf through the whole path: a real Apicurio registry (deploy/schema-registry-local)
 * holding the .proto text, values framed as Confluent's Protobuf serializer frames them
 * (message-index list included), a real broker and a real replica process, the rows read
 * back by LanceDB and by pylance.
 */
const suite = brokerSuite('kl-protobuf');
const registry = schemaRegistrySuite();
const subjectOf = (topic: string) => `${topic}-value`;

/** A producer's protobufjs types, the well-known imports loaded as a producer's build would. */
function producerTypes(proto: string): protobuf.Root {
  const root = protobuf.parse(proto, new protobuf.Root(), { keepCase: true }).root;
  for (const name of ['timestamp', 'duration', 'wrappers'])
    root.addJSON(protobuf.common.get(`google/protobuf/${name}.proto`)!.nested!);
  return root;
}

function encode(root: protobuf.Root, type: string, message: object): Uint8Array {
  const t = root.lookupType(type);
  return t.encode(t.fromObject(message)).finish();
}

test('every mapped Protobuf type lands in Lance with its value, read back by LanceDB and by pylance; each kind of bad value is a dead letter with its reason and the schema id', async () => {
  const sr = new SchemaRegistry({ host: registry.url });
  const consumer = await registryConsumer(suite, 'protobuf', registry.url);
  const { id } = await sr.register(
    { type: SchemaType.PROTOBUF, schema: EVERYTHING_PROTO },
    { subject: subjectOf(consumer.topic) },
  );
  const root = producerTypes(EVERYTHING_PROTO);
  const good = EVERYTHING_MESSAGES.map((m) =>
    protobufFramed(id, EVERYTHING_INDEXES, encode(root, 'acme.Everything', m)),
  );
  // @kafkajs/confluent-schema-registry 4.1.0 writes no message-index list (the header, then
  // the message of the file's first type): not Confluent's framing, so not readable as it.
  const withoutIndexes = await sr.encode(id, { note: 'x' });
  expect([...withoutIndexes.subarray(5)]).toEqual([...encode(root, 'acme.Other', { note: 'x' })]);
  const subMicrosecond = protobufFramed(
    id,
    EVERYTHING_INDEXES,
    encode(root, 'acme.Everything', { ts: { seconds: '1', nanos: 1 } }),
  );
  await produce(suite, consumer.topic, [
    good[0]!,
    Buffer.from('{"not":"protobuf"}'),
    withUnknownSchemaId(good[0]!),
    protobufFramed(id, [5], encode(root, 'acme.Other', { note: 'y' })),
    good[1]!.subarray(0, good[1]!.length - 1),
    withoutIndexes,
    subMicrosecond,
    good[1]!,
  ]);

  const { dataDir, rows, letters, exit } = await roundTrip(suite, consumer, 'kl-protobuf-replica', {
    rows: 2,
    letters: 6,
  });
  expect(exit).toEqual({ code: 0, signal: null });

  expect(rows.numRows).toBe(2);
  expect(plainColumn(rows, '_offset')).toEqual([0n, 7n]);
  expectColumns(rows, EVERYTHING_PROTO_ARROW_TYPES, EVERYTHING_PROTO_EXPECTED);
  expect(letters.map((l) => [l.offset, l.reason])).toEqual([
    [1, 'wrong-magic-byte'],
    [2, 'unknown-schema-id'],
    [3, 'invalid-message-index'],
    [4, 'undecodable-payload'],
    [5, 'invalid-message-index'],
    [6, 'undecodable-payload'],
  ]);
  expect(letters[1]!.detail).toMatch(/^schema id 2000000000: the registry has no such schema/);
  expect(letters[2]!.detail).toMatch(
    new RegExp(`^schema id ${id}: message index \\[5\\]: the file has 2 message type`),
  );
  expect(letters[3]!.detail).toMatch(
    new RegExp(`^schema id ${id}: the payload is not a acme.Everything message`),
  );
  expect(letters[4]!.detail).toMatch(new RegExp(`^schema id ${id}: `));
  expect(letters[5]!.detail).toMatch(
    new RegExp(`^schema id ${id}: a google.protobuf.Timestamp with 1 nanoseconds`),
  );

  await expectPylanceColumns(dataDir, EVERYTHING_PROTO_ARROW_TYPES, EVERYTHING_PROTO_EXPECTED);
  await fsp.rm(dataDir, { recursive: true, force: true });
}, 180_000);

const LOG_V1 =
  'syntax = "proto3";\npackage demo;\n\nmessage Log {\n  int64 n = 1;\n  string message = 2;\n}\n';
const LOG_V2 =
  'syntax = "proto3";\npackage demo;\n\nmessage Log {\n  int64 n = 1;\n  string message = 2;\n  optional string region = 3;\n}\n';

test('a second schema version mid-stream adds a nullable column to the table; messages of both versions land', async () => {
  const sr = new SchemaRegistry({ host: registry.url });
  const consumer = await registryConsumer(suite, 'protobuf', registry.url);
  const subject = { subject: subjectOf(consumer.topic) };
  const v1 = (await sr.register({ type: SchemaType.PROTOBUF, schema: LOG_V1 }, subject)).id;
  const r1 = producerTypes(LOG_V1);
  const one = (n: number, message: string) => protobufFramed(v1, [0], encode(r1, 'demo.Log', { n, message }));
  await produce(suite, consumer.topic, [one(0, 'a'), one(1, 'b')]);
  const dataDir = await tempDir('kl-protobuf-evolution');
  const replica = new ReplicaProcess(consumer.file, dataDir, testBrokers());
  const first = await lanceRows(dataDir, 2);
  expect(first.schema.fields.map((f) => f.name)).not.toContain('region');

  const v2 = (await sr.register({ type: SchemaType.PROTOBUF, schema: LOG_V2 }, subject)).id;
  expect(v2).not.toBe(v1);
  const r2 = producerTypes(LOG_V2);
  const two = (m: object) => protobufFramed(v2, [0], encode(r2, 'demo.Log', m));
  await produce(suite, consumer.topic, [
    two({ n: 2, message: 'c', region: 'eu' }),
    one(3, 'd'),
    two({ n: 4, message: 'e' }),
  ]);
  const all = await lanceRows(dataDir, 5);
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  const column = (name: string) => columnByOffset(all, name);
  expect(column('n')).toEqual([0n, 1n, 2n, 3n, 4n]);
  expect(column('message')).toEqual(['a', 'b', 'c', 'd', 'e']);
  // An absent proto3 `optional` field is null, not "": it has presence.
  expect(column('region')).toEqual([null, null, 'eu', null, null]);
  expect(all.schema.fields.find((f) => f.name === 'region')?.nullable).toBe(true);
  expect(await deadLetters(suite, consumer)).toEqual([]);
  await fsp.rm(dataDir, { recursive: true, force: true });
}, 180_000);

const KEY = {
  type: 'record',
  name: 'LogKey',
  namespace: 'demo',
  fields: [
    { name: 'host', type: 'string' },
    { name: 'shard', type: 'long' },
  ],
};

test('an Avro key beside a Protobuf value: the key schema is fetched by its own id, and _key is a struct of its fields, read back by LanceDB and pylance', async () => {
  const sr = new SchemaRegistry({ host: registry.url });
  const consumer = await registryConsumer(suite, 'protobuf', registry.url, {
    includeKey: true,
    keyFormat: 'avro',
  });
  const keyId = (
    await sr.register(
      { type: SchemaType.AVRO, schema: JSON.stringify(KEY) },
      { subject: `${consumer.topic}-key` },
    )
  ).id;
  const valueId = (
    await sr.register({ type: SchemaType.PROTOBUF, schema: LOG_V1 }, { subject: subjectOf(consumer.topic) })
  ).id;
  const root = producerTypes(LOG_V1);
  const value = (n: number) =>
    protobufFramed(valueId, [0], encode(root, 'demo.Log', { n, message: `m${n}` }));
  await produce(suite, consumer.topic, [
    { key: await sr.encode(keyId, { host: 'web-1', shard: 3 }), value: value(0) },
    { key: null, value: value(1) },
    { key: Buffer.from('not framed'), value: value(2) },
    { key: await sr.encode(keyId, { host: 'web-2', shard: 4 }), value: value(3) },
  ]);
  const dataDir = await tempDir('kl-protobuf-keys');
  const replica = new ReplicaProcess(consumer.file, dataDir, testBrokers());
  const rows = await lanceRows(dataDir, 3);
  const letters = await until(async () => {
    const l = await deadLetters(suite, consumer);
    return l.length >= 1 ? l : undefined;
  }, 'a dead letter');
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  expect(String(rows.schema.fields.find((f) => f.name === '_key')?.type)).toBe(
    'Struct<{host:Utf8, shard:Int64}>',
  );
  const byOffset = (name: string) => columnByOffset(rows, name);
  expect(byOffset('_key')).toEqual([{ host: 'web-1', shard: 3n }, null, { host: 'web-2', shard: 4n }]);
  expect(byOffset('n')).toEqual([0n, 1n, 3n]);
  expect(letters.map((l) => [l.offset, l.reason])).toEqual([[2, 'wrong-magic-byte']]);
  expect(letters[0]!.detail).toMatch(/^the key: /);
  const read = await pylanceRows(dataDir);
  expect(read.map((r) => r._key)).toEqual([
    { host: 'web-1', shard: '3' },
    null,
    { host: 'web-2', shard: '4' },
  ]);
  await fsp.rm(dataDir, { recursive: true, force: true });
}, 180_000);
