import { spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { resolveConsumer } from '../../src/config';
import { datasetPathOf } from '../../src/cli/lance-read';
import { keySchemaProblems } from '../../src/lance/commit-table';
import { ddbTableNameOf, objectStoreProblems, redactStorageOptions } from '../../src/lance/store-config';
import { writeConsumer } from '../support/ingestion-fixture';
import { tempDir } from '../support/rows';
import { S3_BUCKET, s3DatabaseUri, s3LocalSuite } from '../support/s3-local';

/**
 * A bad object-store configuration stops `kafka-lance run` at start, within seconds,
 * with a message that names the problem and the field, and never the secret; never a
 * hang on LanceDB's retries. The store is checked before Kafka is contacted, so these
 * runs need no broker (the brokers given are unreachable on purpose). Run after
 * `npm run build` (the CLI runs from dist/).
 */
const s3 = s3LocalSuite();
const BIN = path.resolve(__dirname, '../../bin/kafka-lance');
const SECRET = 'not-the-secret-7f3a';

let dir: string;
beforeAll(async () => {
  dir = await tempDir('kl-s3-config');
});
afterAll(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

async function runWith(
  lance: Record<string, unknown>,
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; output: string; ms: number }> {
  const name = `bad${Math.random().toString(36).slice(2, 8)}`;
  const file = await writeConsumer(dir, {
    name,
    topics: ['never-read'],
    schema: 'infer',
    lance,
  });
  const started = performance.now();
  const child = spawn(
    process.execPath,
    [
      BIN,
      'run',
      '-c',
      file,
      '--data-dir',
      path.join(dir, name),
      '--brokers',
      '127.0.0.1:1',
      '--metrics-port',
      '0',
      '--metrics-host',
      '127.0.0.1',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env },
  );
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (output += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (output += c));
  const code = await new Promise<number | null>((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('exit', (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  return { code, output, ms: performance.now() - started };
}

const good = () => ({ ...s3.storageOptions });

test.each([
  [
    'wrong endpoint',
    { uri: s3DatabaseUri('cfg'), storageOptions: { ...good(), endpoint: 'http://127.0.0.1:9' } },
    /lance\.storageOptions\.endpoint: cannot reach http:\/\/127\.0\.0\.1:9/,
  ],
  [
    'wrong credentials',
    { uri: s3DatabaseUri('cfg'), storageOptions: { ...good(), aws_secret_access_key: SECRET } },
    /lance\.storageOptions\.aws_secret_access_key: the store refused the credentials .*SignatureDoesNotMatch/,
  ],
  [
    'missing bucket',
    { uri: 's3://no-such-bucket-kl/db', storageOptions: good() },
    /lance\.uri: bucket "no-such-bucket-kl" .* does not exist/,
  ],
  [
    'neither endpoint nor region',
    { uri: s3DatabaseUri('cfg'), storageOptions: { aws_access_key_id: 'a', aws_secret_access_key: SECRET } },
    /lance\.storageOptions: s3:\/\/.* needs an endpoint .* or a region/,
  ],
  ['an unknown scheme', { uri: 'ftp://host/db' }, /lance\.uri: a local directory or s3:\/\//],
])('%s: exits 2 at start within seconds, naming the problem, never the secret', async (_, lance, message) => {
  // Only what the definition says: no endpoint or region from this machine's environment.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_')));
  const run = await runWith(lance, env);
  expect(run.output).toMatch(message);
  expect(run.code).toBe(2);
  expect(run.ms).toBeLessThan(15_000);
  expect(run.output).not.toContain(SECRET);
  expect(run.output).not.toContain('kafka-lance-secret');
});

test('credentials and endpoint from the AWS environment variables are enough (what LanceDB reads itself)', () => {
  const env = { AWS_ENDPOINT_URL: 'http://127.0.0.1:9000' };
  expect(objectStoreProblems(`s3://${S3_BUCKET}/db`, { allow_http: 'true' }, env)).toEqual([]);
  expect(objectStoreProblems(`s3://${S3_BUCKET}/db`, undefined, { AWS_REGION: 'eu-west-1' })).toEqual([]);
  expect(objectStoreProblems(`s3://${S3_BUCKET}/db`, { aws_access_key_id: 'k', region: 'x' }, {})).toEqual([
    expect.objectContaining({ field: 'lance.storageOptions.aws_secret_access_key' }),
  ]);
  expect(
    objectStoreProblems(`s3://${S3_BUCKET}/db`, { endpoint: 'http://127.0.0.1:9000' }, {}).map(
      (p) => p.field,
    ),
  ).toEqual(['lance.storageOptions.allow_http']);
  expect(
    redactStorageOptions({ aws_secret_access_key: SECRET, aws_session_token: 't', region: 'r' }),
  ).toEqual({
    aws_secret_access_key: '[redacted]',
    aws_session_token: '[redacted]',
    // Every value, not those whose names look secret: an endpoint can carry a token too.
    region: '[redacted]',
  });
});

test('the schema names the field: storageOptions with a local directory, a bucket-less s3 uri', () => {
  const base = { name: 'c', brokers: ['b:9092'], topics: ['t'], schema: 'infer' };
  expect(() =>
    resolveConsumer({ ...base, lance: { uri: '/data/lance', storageOptions: { a: 'b' } } }, 'x'),
  ).toThrow(/lance\.storageOptions: storageOptions apply to an object-store uri/);
  expect(() => resolveConsumer({ ...base, lance: { uri: 's3://' } }, 'x')).toThrow(
    /lance\.uri: names no bucket/,
  );
  const ok = resolveConsumer({ ...base, lance: { uri: 's3://b/p', storageOptions: { region: 'r' } } }, 'x');
  expect([ok.lance.commits, ok.lance.singleWriter]).toEqual(['probe', false]);
});

test('an empty AWS_ENDPOINT_URL is named (object_store would panic on it)', () => {
  expect(objectStoreProblems(`s3://${S3_BUCKET}/db`, { region: 'r' }, { AWS_ENDPOINT_URL: '' })).toEqual([
    expect.objectContaining({ field: 'AWS_ENDPOINT_URL' }),
  ]);
});

test('an s3+ddb:// uri names its DynamoDB commit table and a region; a malformed one names the field', () => {
  const base = { name: 'c', brokers: ['b:9092'], topics: ['t'], schema: 'infer' };
  expect(() =>
    resolveConsumer({ ...base, lance: { uri: 's3+ddb://b/p', storageOptions: { region: 'r' } } }, 'x'),
  ).toThrow(/lance\.uri: s3\+ddb:\/\/ names its DynamoDB commit table in the query/);
  expect(() =>
    resolveConsumer(
      { ...base, lance: { uri: 's3+ddb://b/p?ddbTableName=x', storageOptions: { region: 'r' } } },
      'x',
    ),
  ).toThrow(/lance\.uri: s3\+ddb/);
  const uri = 's3+ddb://b/p?ddbTableName=commits';
  expect(ddbTableNameOf(uri)).toBe('commits');
  expect(objectStoreProblems(uri, { endpoint: 'http://h:1', allow_http: 'true' }, {})).toEqual([
    expect.objectContaining({ field: 'lance.storageOptions.region' }),
  ]);
  expect(objectStoreProblems(uri, { region: 'r', dynamodb_endpoint: 'localhost:8000' }, {})).toEqual([
    expect.objectContaining({ field: 'lance.storageOptions.dynamodb_endpoint' }),
  ]);
  expect(objectStoreProblems(uri, { region: 'r' }, { DYNAMODB_ENDPOINT: 'http://127.0.0.1:8000' })).toEqual(
    [],
  );
});

test('a commit table with another key schema is named with what differs', () => {
  const described = (hash: [string, string], range?: [string, string]) => ({
    Table: {
      KeySchema: [
        { AttributeName: hash[0], KeyType: 'HASH' as const },
        ...(range ? [{ AttributeName: range[0], KeyType: 'RANGE' as const }] : []),
      ],
      AttributeDefinitions: [
        { AttributeName: hash[0], AttributeType: hash[1] },
        ...(range ? [{ AttributeName: range[0], AttributeType: range[1] }] : []),
      ],
    },
  });
  expect(keySchemaProblems(described(['base_uri', 'S'], ['version', 'N']))).toEqual([]);
  expect(keySchemaProblems(described(['base_uri', 'S']))).toEqual(['no range key']);
  expect(keySchemaProblems(described(['id', 'S'], ['version', 'S']))).toEqual([
    'hash key is id, not base_uri',
    'range key version is of type S, not N',
  ]);
});

test('the dataset path of an s3+ddb:// table keeps the commit table query after the table (as LanceDB and pylance read it)', () => {
  expect(datasetPathOf('s3+ddb://b/p?ddbTableName=commits', 'logs')).toBe(
    's3+ddb://b/p/logs.lance?ddbTableName=commits',
  );
  expect(datasetPathOf('s3://b/p/', 'logs')).toBe('s3://b/p/logs.lance');
});
