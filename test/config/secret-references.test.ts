import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { ConfigError, resolveConsumer } from '../../src/config';

const base = {
  name: 'secured',
  brokers: ['127.0.0.1:9093'],
  topics: ['t'],
  schema: 'infer',
};

function problemsOf(run: () => unknown): { field: string; message: string }[] {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return [...error.problems];
    throw error;
  }
  throw new Error('expected a ConfigError');
}

describe('secret references in a consumer definition', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'secret-ref-'));
  const source = path.join(dir, 'consumer.json');
  writeFileSync(path.join(dir, 'password.txt'), 'from-a-file');
  const keyPem = generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
    .privateKey.export({ type: 'pkcs8', format: 'pem' })
    .toString();
  writeFileSync(path.join(dir, 'key.pem'), keyPem);

  test('${env:NAME} and { file } are read at start, relative files from the definition folder', () => {
    const consumer = resolveConsumer(
      {
        ...base,
        client: {
          ssl: { servername: 'kafka', key: { file: 'key.pem' }, passphrase: '${env:KEY_PASS}' },
          sasl: {
            mechanism: 'scram-sha-512',
            username: 'u-${env:TENANT}',
            password: { file: 'password.txt' },
          },
        },
        lance: { uri: 's3://bucket/t', storageOptions: { aws_secret_access_key: '${env:AWS_SECRET}' } },
      },
      source,
      { KEY_PASS: 'unused', TENANT: 'acme', AWS_SECRET: 's3cr3t' },
    );
    expect(consumer.client.ssl).toEqual({ servername: 'kafka', key: keyPem, passphrase: 'unused' });
    expect(consumer.client.sasl).toEqual({
      mechanism: 'scram-sha-512',
      username: 'u-acme',
      password: 'from-a-file',
    });
    expect(consumer.lance.storageOptions).toEqual({ aws_secret_access_key: 's3cr3t' });
  });

  test('a missing variable and an unreadable file are each named by their option, all at once', () => {
    const problems = problemsOf(() =>
      resolveConsumer(
        {
          ...base,
          client: {
            sasl: { mechanism: 'plain', username: '${env:KAFKA_USER}', password: { file: 'nope.txt' } },
          },
        },
        source,
        {},
      ),
    );
    expect(problems).toEqual([
      { field: 'client.sasl.username', message: 'the environment variable KAFKA_USER is not set' },
      {
        field: 'client.sasl.password',
        message: `cannot read the secret file ${path.join(dir, 'nope.txt')} (ENOENT)`,
      },
    ]);
  });

  test('oauthbearer needs a token provider function, which a JSON definition cannot give', () => {
    const problems = problemsOf(() =>
      resolveConsumer({ ...base, client: { sasl: { mechanism: 'oauthbearer' } } }, source, {}),
    );
    expect(problems.map((p) => p.field)).toEqual(['client.sasl.oauthBearerProvider']);
    const provider = () => Promise.resolve({ value: 'token' });
    const consumer = resolveConsumer(
      { ...base, client: { sasl: { mechanism: 'oauthbearer', oauthBearerProvider: provider } } },
      source,
      {},
    );
    expect(consumer.client.sasl).toEqual({ mechanism: 'oauthbearer', oauthBearerProvider: provider });
  });

  test('a sasl field that no mechanism has is refused by name (a typo would otherwise connect without it)', () => {
    const problems = problemsOf(() =>
      resolveConsumer(
        { ...base, client: { sasl: { mechanism: 'plain', username: 'u', pasword: 'p' } } },
        source,
        {},
      ),
    );
    expect(problems.map((p) => p.field)).toEqual(expect.arrayContaining(['client.sasl']));
  });

  test('malformed key and certificate material stops the start naming its option, not its content', () => {
    const problems = problemsOf(() =>
      resolveConsumer(
        {
          ...base,
          client: { ssl: { key: 'not-a-key-SENTINEL', cert: 'not-a-cert-SENTINEL', ca: [keyPem] } },
        },
        source,
        {},
      ),
    );
    expect(problems.map((p) => p.field)).toEqual(['client.ssl.ca', 'client.ssl.cert', 'client.ssl.key']);
    expect(JSON.stringify(problems)).not.toContain('SENTINEL');
    expect(JSON.stringify(problems)).not.toContain('PRIVATE KEY');
  });

  test('a malformed schemaRegistry.ssl key stops the start and validate naming it, instead of crashing the consumer loop later', () => {
    const problems = problemsOf(() =>
      resolveConsumer(
        {
          ...base,
          format: 'avro',
          schemaRegistry: {
            url: 'https://registry:8081',
            ssl: { key: '-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----' },
          },
        },
        source,
        {},
      ),
    );
    expect(problems.map((p) => p.field)).toEqual(['schemaRegistry.ssl.key']);
    expect(problems[0]!.message).toMatch(/^not a private key node can read: /);
  });
});
