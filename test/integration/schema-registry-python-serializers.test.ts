import { promises as fsp } from 'node:fs';
import * as protobuf from 'protobufjs';
import type { Table } from 'apache-arrow';
import { brokerSuite } from '../support/broker-suite';
import { testBrokers } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';
import {
  EVERYTHING_MESSAGES,
  EVERYTHING_PROTO,
  EVERYTHING_PROTO_ARROW_TYPES,
  EVERYTHING_PROTO_DESCRIPTOR,
  EVERYTHING_PROTO_EXPECTED,
} from '../support/protobuf-fixtures';
import { columnByOffset, deadLetters, lanceRows, registryConsumer } from '../support/registry-round-trip';
import { schemaRegistrySuite } from '../support/schema-registry-local';
import { producePython, type PythonProduce, type PythonValues } from '../support/python-serializers';
import type { TestConsumer } from '../support/broker-suite';

/**
 * Values produced by Confluent's own Python serializers (confluent-kafka 2.16.1, a venv
 * made by test/support/python-serializers.ts) with their defaults, against the real local
 * registry (Apicurio's Confluent API) and the real broker, read by a real replica: every
 * value a row with its exact values, no dead letter. Python's ProtobufSerializer registers
 * the file as a base64 FileDescriptorProto, and the files it imports as subjects of their
 * own (schema references): a replica that reads only .proto text dead-letters all of it.
 */
const suite = brokerSuite('kl-python-serializers');
const registry = schemaRegistrySuite();

/** Values per topic: a few hundred, every one checked. */
const COUNT = 200;

async function produceAndRead(
  consumer: TestConsumer,
  request: PythonValues & { readonly conf?: PythonProduce['conf'] },
): Promise<{ rows: Table; schemaIds: number[] }> {
  const { schemaIds } = await producePython({
    ...request,
    brokers: testBrokers().join(','),
    registry: registry.url,
    topic: consumer.topic,
  });
  const dataDir = await tempDir('kl-python-serializers');
  const replica = new ReplicaProcess(consumer.file, dataDir, testBrokers());
  try {
    const rows = await lanceRows(dataDir, COUNT, 120_000);
    expect(await deadLetters(suite, consumer)).toEqual([]);
    expect(rows.numRows).toBe(COUNT);
    return { rows, schemaIds };
  } finally {
    expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
}

async function registryGet(path: string): Promise<{ schema?: string; references?: unknown[] }> {
  const response = await fetch(`${registry.url}${path}`);
  return (await response.json()) as { schema?: string; references?: unknown[] };
}

function encoder(files: readonly string[], type: string): (message: object) => Uint8Array {
  const root = new protobuf.Root();
  for (const f of files) protobuf.parse(f, root, { keepCase: true });
  for (const name of ['timestamp', 'duration', 'wrappers'])
    root.addJSON(protobuf.common.get(`google/protobuf/${name}.proto`)!.nested!);
  const t = root.lookupType(type);
  return (message) => t.encode(t.fromObject(message)).finish();
}

/** Everything's two messages, alternating: offset o holds EVERYTHING_MESSAGES[o % 2]. */
const everythingValues = () => {
  const encode = encoder([EVERYTHING_PROTO], 'acme.Everything');
  return Array.from({ length: COUNT }, (_, i) => ({
    message: 'acme.Everything',
    value: encode(EVERYTHING_MESSAGES[i % 2]!),
  }));
};

function expectEverything(rows: Table): void {
  for (const [name, type] of Object.entries(EVERYTHING_PROTO_ARROW_TYPES)) {
    expect([name, String(rows.schema.fields.find((f) => f.name === name)?.type)]).toEqual([name, type]);
  }
  // A map is unordered: Python's runtime writes its entries in an order of its own.
  const byKey = (entries: unknown) =>
    (entries as { key: string }[]).slice().sort((a, b) => a.key.localeCompare(b.key));
  for (const [name, values] of Object.entries(EVERYTHING_PROTO_EXPECTED)) {
    const expected = Array.from({ length: COUNT }, (_, i) => values[i % 2]);
    const read = columnByOffset(rows, name);
    if (name === 'attrs') expect(read.map(byKey)).toEqual(expected.map(byKey));
    else expect([name, read]).toEqual([name, expected]);
  }
}

test("Python's ProtobufSerializer with its defaults (auto-registration of a base64 FileDescriptorProto): every value lands with every mapped type exact", async () => {
  const consumer = await registryConsumer(suite, 'protobuf', registry.url);
  const { rows, schemaIds } = await produceAndRead(consumer, {
    format: 'protobuf',
    files: { 'everything.proto': EVERYTHING_PROTO },
    values: everythingValues(),
  });
  expect(schemaIds).toHaveLength(1);
  // The hazard itself: the registry holds and answers the descriptor, not .proto text.
  const stored = await registryGet(`/schemas/ids/${schemaIds[0]}`);
  expect(stored.schema).toMatch(/^[A-Za-z0-9+/]+={0,2}$/);
  expectEverything(rows);
}, 300_000);

const ORDER_PROTO = `syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "shop/money.proto";
message Order {
  map<string, int32> counts = 1;
  message Line {
    string sku = 1;
    shop.Money price = 2;
  }
  repeated Line lines = 2;
  google.protobuf.Timestamp placed = 3;
}
`;
const MONEY_PROTO =
  'syntax = "proto3";\npackage shop;\nmessage Money {\n  string currency = 1;\n  int64 units = 2;\n}\n';

test("Python's ProtobufSerializer registers an imported file as a reference subject; a nested message after a map field is framed [0, 1] and read as that message", async () => {
  const consumer = await registryConsumer(suite, 'protobuf', registry.url);
  const files = [ORDER_PROTO, MONEY_PROTO];
  const line = encoder(files, 'shop.Order.Line');
  const order = encoder(files, 'shop.Order');
  // Even offsets: Lines (message index [0, 1]: protoc puts Order's map entry before Line);
  // odd offsets: Orders ([0]). One file, so one schema id for both.
  const values = Array.from({ length: COUNT }, (_, o) => {
    const i = Math.floor(o / 2);
    return o % 2 === 0
      ? {
          message: 'shop.Order.Line',
          value: line({ sku: `sku-${i}`, price: { currency: 'EUR', units: String(-i * 1_000_000_007) } }),
        }
      : {
          message: 'shop.Order',
          value: order({
            counts: { [`k${i}`]: i },
            placed: { seconds: String(1_764_676_800 + i), nanos: 5_000 },
          }),
        };
  });
  const { rows, schemaIds } = await produceAndRead(consumer, {
    format: 'protobuf',
    files: { 'shop/order.proto': ORDER_PROTO, 'shop/money.proto': MONEY_PROTO },
    values,
  });
  expect(schemaIds).toHaveLength(1);
  const stored = await registryGet(`/schemas/ids/${schemaIds[0]}`);
  expect(stored.schema).toMatch(/^[A-Za-z0-9+/]+={0,2}$/);
  expect(stored.references).toEqual([{ name: 'shop/money.proto', subject: 'shop/money.proto', version: 1 }]);
  const at = (parity: number, f: (i: number) => unknown) =>
    Array.from({ length: COUNT }, (_, o) => (o % 2 === parity ? f(Math.floor(o / 2)) : null));
  expect(columnByOffset(rows, 'sku')).toEqual(at(0, (i) => `sku-${i}`));
  expect(columnByOffset(rows, 'price')).toEqual(
    at(0, (i) => ({ currency: 'EUR', units: BigInt(-i * 1_000_000_007) })),
  );
  expect(columnByOffset(rows, 'counts')).toEqual(at(1, (i) => [{ key: `k${i}`, value: i }]));
  expect(columnByOffset(rows, 'lines')).toEqual(at(1, () => []));
  expect(columnByOffset(rows, 'placed')).toEqual(at(1, (i) => BigInt(1_764_676_800 + i) * 1_000_000n + 5n));
}, 300_000);

/**
 * Against Apicurio 3.3.3, Python's ProtobufSerializer cannot use `use.latest.version` (nor
 * `use.schema.id`): it asks for the schema with `?format=serialized`, and Apicurio answers a
 * schema registered as a descriptor with HTTP 500 ("Syntax error … unexpected label"), one
 * registered as .proto text with the descriptor's raw bytes where base64 belongs (the
 * serializer fails on them: UnicodeEncodeError). It fails before producing anything.
 * With auto-registration off and no latest version it looks the schema up instead (POST
 * /subjects/<subject>, no format): found when it was registered as the same descriptor.
 */
test("Python's ProtobufSerializer with auto-registration off frames values with the schema registered before it; with use.latest.version, Apicurio's answer stops it before it produces", async () => {
  const consumer = await registryConsumer(suite, 'protobuf', registry.url);
  // Over HTTP: @kafkajs/confluent-schema-registry parses what it registers, and reads only text.
  const registered = await fetch(`${registry.url}/subjects/${consumer.topic}-value/versions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/vnd.schemaregistry.v1+json' },
    body: JSON.stringify({ schemaType: 'PROTOBUF', schema: EVERYTHING_PROTO_DESCRIPTOR }),
  });
  const { id } = (await registered.json()) as { id: number };
  const request = {
    format: 'protobuf',
    files: { 'everything.proto': EVERYTHING_PROTO },
    values: everythingValues(),
  } as const;
  await expect(
    producePython({
      ...request,
      conf: { 'auto.register.schemas': false, 'use.latest.version': true },
      brokers: testBrokers().join(','),
      registry: registry.url,
      topic: consumer.topic,
    }),
  ).rejects.toThrow(/unexpected label/);
  const { rows, schemaIds } = await produceAndRead(consumer, {
    ...request,
    conf: { 'auto.register.schemas': false },
  });
  expect(schemaIds).toEqual([id]);
  expectEverything(rows);
}, 300_000);

const READING_AVRO = {
  type: 'record',
  name: 'Reading',
  namespace: 'demo',
  fields: [
    { name: 'n', type: 'long' },
    { name: 'big', type: 'long' },
    { name: 'label', type: 'string' },
    { name: 'ratio', type: 'double' },
    { name: 'ok', type: 'boolean' },
    { name: 'raw', type: 'bytes' },
    { name: 'color', type: { type: 'enum', name: 'Color', symbols: ['RED', 'GREEN'] } },
    { name: 'tags', type: { type: 'array', items: 'string' } },
    { name: 'note', type: ['null', 'string'], default: null },
    { name: 'at', type: { type: 'long', logicalType: 'timestamp-micros' } },
  ],
};
const BIG = 9_007_199_254_740_993n; // 2^53 + 1: not a double
const AT = 1_764_676_800_123_456n;
/** JSON's raw number text (Node 24), for integers beyond 2^53 that JSON.stringify cannot write. */
const rawNumber = (n: bigint): unknown =>
  (JSON as unknown as { rawJSON: (t: string) => unknown }).rawJSON(String(n));

test("Python's AvroSerializer with its defaults: every value lands with its exact values", async () => {
  const consumer = await registryConsumer(suite, 'avro', registry.url);
  const values = Array.from({ length: COUNT }, (_, i) => ({
    n: i,
    big: rawNumber(BIG + BigInt(i)),
    label: `reading ${i} é`,
    ratio: i / 8,
    ok: i % 2 === 0,
    raw: { $bytes: Buffer.from([i % 256, 0, 255]).toString('base64') },
    color: i % 3 === 0 ? 'GREEN' : 'RED',
    tags: i % 4 === 0 ? [] : [`t${i}`, 'x'],
    note: i % 5 === 0 ? null : `note ${i}`,
    at: rawNumber(AT + BigInt(i)),
  }));
  const { rows } = await produceAndRead(consumer, {
    format: 'avro',
    schema: JSON.stringify(READING_AVRO),
    values,
  });
  const each = (f: (i: number) => unknown) => Array.from({ length: COUNT }, (_, i) => f(i));
  expect(columnByOffset(rows, 'n')).toEqual(each((i) => BigInt(i)));
  expect(columnByOffset(rows, 'big')).toEqual(each((i) => BIG + BigInt(i)));
  expect(columnByOffset(rows, 'label')).toEqual(each((i) => `reading ${i} é`));
  expect(columnByOffset(rows, 'ratio')).toEqual(each((i) => i / 8));
  expect(columnByOffset(rows, 'ok')).toEqual(each((i) => i % 2 === 0));
  expect(columnByOffset(rows, 'raw')).toEqual(each((i) => [i % 256, 0, 255]));
  expect(columnByOffset(rows, 'color')).toEqual(each((i) => (i % 3 === 0 ? 'GREEN' : 'RED')));
  expect(columnByOffset(rows, 'tags')).toEqual(each((i) => (i % 4 === 0 ? [] : [`t${i}`, 'x'])));
  expect(columnByOffset(rows, 'note')).toEqual(each((i) => (i % 5 === 0 ? null : `note ${i}`)));
  expect(columnByOffset(rows, 'at')).toEqual(each((i) => AT + BigInt(i)));
}, 300_000);

const READING_JSON_SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'Reading',
  type: 'object',
  properties: {
    n: { type: 'integer' },
    big: { type: 'integer' },
    label: { type: 'string' },
    ratio: { type: 'number' },
    ok: { type: 'boolean' },
    at: { type: 'string', format: 'date-time' },
    tags: { type: 'array', items: { type: 'string' } },
    inner: { type: 'object', properties: { x: { type: 'integer' } }, required: ['x'] },
    note: { type: ['string', 'null'] },
  },
  required: ['n', 'label'],
};

test("Python's JSONSerializer with its defaults: every value lands with its exact values", async () => {
  const consumer = await registryConsumer(suite, 'json-schema', registry.url);
  const second = (i: number) => String(i % 60).padStart(2, '0');
  const values = Array.from({ length: COUNT }, (_, i) => ({
    n: i,
    big: rawNumber(BIG + BigInt(i)),
    label: `reading ${i}`,
    ratio: i / 4,
    ok: i % 2 === 1,
    at: `2025-12-02T12:00:${second(i)}.123456Z`,
    tags: [`t${i}`],
    inner: { x: -i },
    note: i % 7 === 0 ? null : `n${i}`,
  }));
  const { rows } = await produceAndRead(consumer, {
    format: 'json',
    schema: JSON.stringify(READING_JSON_SCHEMA),
    values,
  });
  const each = (f: (i: number) => unknown) => Array.from({ length: COUNT }, (_, i) => f(i));
  expect(columnByOffset(rows, 'n')).toEqual(each((i) => BigInt(i)));
  expect(columnByOffset(rows, 'big')).toEqual(each((i) => BIG + BigInt(i)));
  expect(columnByOffset(rows, 'label')).toEqual(each((i) => `reading ${i}`));
  expect(columnByOffset(rows, 'ratio')).toEqual(each((i) => i / 4));
  expect(columnByOffset(rows, 'ok')).toEqual(each((i) => i % 2 === 1));
  expect(columnByOffset(rows, 'at')).toEqual(
    each((i) => (1_764_676_800n + BigInt(i % 60)) * 1_000_000n + 123_456n),
  );
  expect(columnByOffset(rows, 'tags')).toEqual(each((i) => [`t${i}`]));
  expect(columnByOffset(rows, 'inner')).toEqual(each((i) => ({ x: BigInt(-i) })));
  expect(columnByOffset(rows, 'note')).toEqual(each((i) => (i % 7 === 0 ? null : `n${i}`)));
}, 300_000);
