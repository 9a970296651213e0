import { existsSync, promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import { brokerSuite } from '../support/broker-suite';
import { testBrokers } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';
import { plainColumn } from '../support/avro-fixtures';
import { deadLetters, lanceRows, produce, registryConsumer, until } from '../support/registry-round-trip';
import { schemaRegistrySuite } from '../support/schema-registry-local';

/**
 * A registry key's `_key` column against the table, across a restart: a real registry, a
 * real broker, real replica processes on one data directory, the rows read back by LanceDB.
 */
const suite = brokerSuite('kl-key-type');
const registry = schemaRegistrySuite();

const VALUE = { type: 'record', name: 'Log', namespace: 'demo', fields: [{ name: 'n', type: 'long' }] };
const KEY = { type: 'record', name: 'LogKey', namespace: 'demo', fields: [{ name: 'host', type: 'string' }] };
/** The key schema after it gained a field (compatible under the registry's BACKWARD rule). */
const KEY_V2 = { ...KEY, fields: [...KEY.fields, { name: 'zone', type: ['null', 'string'], default: null }] };

test("after a restart, keys of a key schema that gained a field are dead letters on _key, and the table's _key keeps its type and takes the other records", async () => {
  const sr = new SchemaRegistry({ host: registry.url });
  const consumer = await registryConsumer(suite, 'avro', registry.url, {
    includeKey: true,
    keyFormat: 'avro',
  });
  const register = async (schema: object, subject: string) =>
    (await sr.register({ type: SchemaType.AVRO, schema: JSON.stringify(schema) }, { subject })).id;
  const valueId = await register(VALUE, `${consumer.topic}-value`);
  const keyV1 = await register(KEY, `${consumer.topic}-key`);
  const record = async (keyId: number, key: object, n: number) => ({
    key: await sr.encode(keyId, key),
    value: await sr.encode(valueId, { n }),
  });
  const dataDir = await tempDir('kl-key-type');

  await produce(suite, consumer.topic, [await record(keyV1, { host: 'a' }, 0)]);
  let replica = new ReplicaProcess(consumer.file, dataDir, testBrokers());
  await lanceRows(dataDir, 1);
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  // The first key the restarted replica sees is of the new key schema.
  const keyV2 = await register(KEY_V2, `${consumer.topic}-key`);
  await produce(suite, consumer.topic, [
    await record(keyV2, { host: 'b', zone: 'z' }, 1),
    await record(keyV1, { host: 'c' }, 2),
  ]);
  replica = new ReplicaProcess(consumer.file, dataDir, testBrokers());
  const rows = await lanceRows(dataDir, 2);
  const letters = await until(async () => {
    const l = await deadLetters(suite, consumer);
    return l.length >= 1 ? l : undefined;
  }, 'a dead letter');
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });

  expect(String(rows.schema.fields.find((f) => f.name === '_key')?.type)).toBe('Struct<{host:Utf8}>');
  expect(plainColumn(rows, 'n').sort()).toEqual([0n, 2n]);
  expect(letters.map((l) => [l.offset, l.reason])).toEqual([[1, 'schema-mismatch']]);
  expect(letters[0]!.detail).toContain("the table's _key is Struct<{host:Utf8}>");
  // Nothing set aside: every publication was taken.
  expect(existsSync(path.join(dataDir, 'dead-letter', `${consumer.name}.publications.jsonl`))).toBe(false);
  await fsp.rm(dataDir, { recursive: true, force: true });
}, 180_000);
