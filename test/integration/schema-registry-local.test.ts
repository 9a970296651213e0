import * as http from 'node:http';
import * as net from 'node:net';
import {
  schemaRegistryLocal,
  schemaRegistryUrl,
  SCRIPT_SCHEMA_REGISTRY_PORT,
} from '../support/schema-registry-local';

/** The project's registry script on a port of its own (the suites' registry may be running). */
const PORT = SCRIPT_SCHEMA_REGISTRY_PORT;
const URL = schemaRegistryUrl(PORT);
const CONTENT_TYPE = 'application/vnd.schemaregistry.v1+json';

/** One request on a connection of its own: a pooled keep-alive socket would outlive a restart. */
function request(method: 'GET' | 'POST', url: string, body?: unknown): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method, agent: false, headers: { 'Content-Type': CONTENT_TYPE } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200) reject(new Error(`${method} ${url}: HTTP ${res.statusCode} ${text}`));
          else resolve(JSON.parse(text));
        });
      },
    );
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

afterAll(() => {
  schemaRegistryLocal('reset', PORT);
}, 60_000);

test('the local registry serves the Confluent API, keeps its schemas and ids across a restart, and stops', async () => {
  schemaRegistryLocal('reset', PORT);
  const started = schemaRegistryLocal('start', PORT);
  expect([started.code, started.output]).toEqual([0, expect.stringContaining(`up: ${URL}`)]);
  expect(schemaRegistryLocal('start', PORT).output).toContain('already running');

  const schema = JSON.stringify({ type: 'record', name: 'Probe', fields: [{ name: 'x', type: 'int' }] });
  const { id } = (await request('POST', `${URL}/subjects/probe-value/versions`, { schema })) as {
    id: number;
  };
  expect(Number.isInteger(id)).toBe(true);
  // Confluent's default, not Apicurio's NONE: an incompatible change is refused.
  expect(await request('GET', `${URL}/config`)).toEqual({ compatibilityLevel: 'BACKWARD' });

  expect(schemaRegistryLocal('stop', PORT).code).toBe(0);
  expect(schemaRegistryLocal('status', PORT).code).toBe(3);
  expect(schemaRegistryLocal('start', PORT).code).toBe(0);
  const again = (await request('GET', `${URL}/schemas/ids/${id}`)) as { schema: string };
  expect(JSON.parse(again.schema)).toEqual(JSON.parse(schema));
  expect(schemaRegistryLocal('stop', PORT).code).toBe(0);
}, 120_000);

test('start fails with a clear message when another process holds the port', async () => {
  schemaRegistryLocal('stop', PORT);
  const squatter = net.createServer();
  await new Promise<void>((resolve) => squatter.listen(PORT, '127.0.0.1', resolve));
  try {
    const started = schemaRegistryLocal('start', PORT);
    expect(started.code).not.toBe(0);
    expect(started.output).toContain(`127.0.0.1:${PORT} is already in use by another process`);
  } finally {
    await new Promise((resolve) => squatter.close(resolve));
  }
});
