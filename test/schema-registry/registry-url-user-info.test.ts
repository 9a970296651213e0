import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  SchemaRegistryClient,
  SchemaRegistryUnavailableError,
} from '../../src/schema-registry/registry-client';

/**
 * A registry URL may carry user info (`https://user:pass@host`, as some registries are
 * configured). The client still authenticates with it, but the URL it shows (logs:
 * schema-registry.unreachable/reachable) and its errors' texts never hold the password.
 */
test('a registry URL with user info authenticates with it and never shows it', async () => {
  const seen: (string | undefined)[] = [];
  const server = http.createServer((request, response) => {
    seen.push(request.headers.authorization);
    response.writeHead(500).end('down');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const client = new SchemaRegistryClient({
    url: `http://svc:pa55word-SENTINEL@127.0.0.1:${port}`,
    cacheTtlMs: 300_000,
    requestTimeoutMs: 2_000,
  });
  try {
    expect(client.url).toBe(`http://[redacted]@127.0.0.1:${port}`);
    const error = await client.schemaById(7).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(SchemaRegistryUnavailableError);
    const unavailable = error as SchemaRegistryUnavailableError;
    expect(unavailable.message).toBe(
      `schema registry http://[redacted]@127.0.0.1:${port}: schema id 7: HTTP 500, not JSON: down`,
    );
    expect(JSON.stringify({ ...unavailable, message: unavailable.message })).not.toContain('SENTINEL');
    expect(seen).toEqual([`Basic ${Buffer.from('svc:pa55word-SENTINEL').toString('base64')}`]);
  } finally {
    client.close();
    server.close();
  }
});
