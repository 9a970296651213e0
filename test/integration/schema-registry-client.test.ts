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
