import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import {
  SchemaRegistryClient,
  SchemaRegistryUnavailableError,
} from '../../src/schema-registry/registry-client';
import { schemaRegistrySuite } from '../support/schema-registry-local';

/** The registry client against the project's real registry: what counts as an answer about the input. */
const registry = schemaRegistrySuite();
const client = (url: string) =>
  new SchemaRegistryClient({ url, cacheTtlMs: 60_000, requestTimeoutMs: 2_000 });

test('a registered schema is found by id, with its type; an id the registry does not know is "not found"', async () => {
  const schema = JSON.stringify({ type: 'record', name: 'Probe', fields: [{ name: 'x', type: 'int' }] });
  const { id } = await new SchemaRegistry({ host: registry.url }).register(
    { type: SchemaType.AVRO, schema },
    { subject: `client-probe-${Date.now()}-value` },
  );
  const c = client(registry.url);
  try {
    const found = await c.schemaById(id);
    expect(found).toMatchObject({ found: true, schemaType: 'AVRO' });
    expect(JSON.parse((found as { schema: string }).schema)).toEqual(JSON.parse(schema));
    expect(await c.schemaById(2_000_000_001)).toMatchObject({ found: false });
  } finally {
    c.close();
  }
});

test('a URL without the API base path and a port nobody listens on are unreachable, never "not found"', async () => {
  const wrongBase = client(registry.url.replace('/apis/ccompat/v7', '/nothing-here'));
  const closedPort = client('http://127.0.0.1:9/apis/ccompat/v7');
  try {
    await expect(wrongBase.schemaById(1)).rejects.toBeInstanceOf(SchemaRegistryUnavailableError);
    await expect(closedPort.schemaById(1)).rejects.toThrow(/ECONNREFUSED/);
  } finally {
    wrongBase.close();
    closedPort.close();
  }
});

test('a schema\'s references come with the id and are found by subject and version (a subject with a slash too); a subject or version the registry lacks is "not found"', async () => {
  const stamp = Date.now();
  const referenced = `refs/${stamp}/money.proto`;
  const post = async (subject: string, body: object) => {
    const response = await fetch(`${registry.url}/subjects/${encodeURIComponent(subject)}/versions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/vnd.schemaregistry.v1+json' },
      body: JSON.stringify(body),
    });
    return ((await response.json()) as { id: number }).id;
  };
  const money = 'syntax = "proto3";\npackage shop;\nmessage Money {\n  int64 units = 1;\n}\n';
  await post(referenced, { schemaType: 'PROTOBUF', schema: money });
  const id = await post(`client-refs-${stamp}-value`, {
    schemaType: 'PROTOBUF',
    schema: `syntax = "proto3";\npackage shop;\nimport "${referenced}";\nmessage Order {\n  shop.Money price = 1;\n}\n`,
    references: [{ name: referenced, subject: referenced, version: 1 }],
  });
  const c = client(registry.url);
  try {
    expect(await c.schemaById(id)).toMatchObject({
      found: true,
      references: [{ name: referenced, subject: referenced, version: 1 }],
    });
    expect(await c.schemaByVersion(referenced, 1, id)).toMatchObject({
      found: true,
      schemaType: 'PROTOBUF',
      schema: money,
      references: [],
    });
    expect(await c.schemaByVersion(`no-such-subject-${stamp}`, 1, id)).toMatchObject({ found: false });
    expect(await c.schemaByVersion(referenced, 99, id)).toMatchObject({ found: false });
  } finally {
    c.close();
  }
});
