import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fsp, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import type { Admin, IHeaders } from 'kafkajs';
import { ensureTopicsServed } from '../../src/kafka/protocol/topic-ready';
import { BIN, ReplicaProcess } from '../../src/harness/replica-process';
import { uniqueName } from '../support/kafka';
import { tempDir } from '../support/rows';
import { s3Local } from '../support/s3-local';
import { secretOptions, type SecretOption } from '../support/secret-options';
import { SECURED, TLS_DIR, securedBrokerSuite, setScramUser } from '../support/secured-broker';

/**
 * A test that cannot forget a secret: every secret-bearing option of the definition
 * (found in its zod schema, so a new one is covered without editing this file) gets a
 * value of its own that no other text has, a replica runs with them through a start, a
 * dead letter, a store outage, a Schema Registry outage and a stop, and none of them
 * appears in a log line, an error text, a metric, `validate`'s or `inspect`'s output or
 * a dead letter. PEM material cannot be an arbitrary text: its base64 lines are what
 * must not appear.
 */
const kafka = securedBrokerSuite();
/** The store of this suite: an s3proxy whose credentials are sentinels (port in the security range). */
const S3_PORT = Number(process.env.KAFKA_SECURED_S3_TEST_PORT ?? 19530);
/** Nothing listens here: the registry is down for the whole run. */
const DOWN_REGISTRY = '127.0.0.1:19529';
const BUCKET = 'secrets-test';
const run = promisify(execFile);
const tag = randomBytes(4).toString('hex');
/** A sentinel per option: letters and digits only, so that it is a valid SCRAM user name too. */
const sentinel = (what: string) => `S3nt1n3l${what.replace(/[^A-Za-z0-9]/g, '')}${tag}`;

const state: { admin?: Admin; work?: string } = {};
const shown: string[] = [];
const secretTexts = new Set<string>();
/** The password of client.p12 (clientPfx), so also the value `client.ssl.passphrase` gets. */
const PFX_PASSPHRASE = sentinel('sslpassphrase');

function secret<T extends string>(value: T): T {
  secretTexts.add(value);
  return value;
}

/** The base64 lines of a PEM or any text: each one must never be shown. */
function material(file: string): string {
  const text = readFileSync(file, 'utf8');
  for (const line of text.split('\n'))
    if (line.length >= 16 && !line.startsWith('-----')) secretTexts.add(line);
  return text;
}

const s3Env = {
  S3_LOCAL_ACCESS_KEY_ID: sentinel('s3accesskey'),
  S3_LOCAL_SECRET_ACCESS_KEY: sentinel('s3secretkey'),
  S3_LOCAL_BUCKET: BUCKET,
};
function s3(command: 'start' | 'stop'): void {
  const saved = { ...process.env };
  Object.assign(process.env, s3Env);
  try {
    const result = s3Local(command, S3_PORT);
    if (result.code !== 0) throw new Error(`s3-local ${command} on ${S3_PORT}: ${result.output}`);
  } finally {
    for (const k of Object.keys(s3Env)) if (saved[k] === undefined) delete process.env[k];
  }
}

beforeAll(async () => {
  state.admin = kafka.admin();
  await state.admin.connect();
  state.work = await tempDir('secrets');
  s3('start');
}, 240_000);

afterAll(async () => {
  await ReplicaProcess.killAll();
  await state.admin?.disconnect();
  s3('stop');
  if (state.work) await fsp.rm(state.work, { recursive: true, force: true });
}, 120_000);

/** A PKCS#12 bundle of the client's key and certificate, its password a sentinel. */
function clientPfx(passphrase: string): string {
  const file = path.join(state.work!, 'client.p12');
  execFileSync('openssl', [
    'pkcs12',
    '-export',
    '-in',
    path.join(TLS_DIR, 'client.crt'),
    '-inkey',
    path.join(TLS_DIR, 'client.key'),
    '-out',
    file,
    '-passout',
    `pass:${passphrase}`,
  ]);
  for (const line of readFileSync(file)
    .toString('base64')
    .match(/.{1,32}/g) ?? [])
    secretTexts.add(line);
  return file;
}

/** Sets `value` at a dotted path (`<name>` becomes a key of its own). */
function setAt(target: Record<string, unknown>, dotted: string, value: unknown): void {
  const keys = dotted.split('.').map((k) => (k === '<name>' ? sentinel('optionname') : k));
  let at = target;
  for (const key of keys.slice(0, -1)) at = (at[key] ??= {}) as Record<string, unknown>;
  at[keys.at(-1)!] = value;
}

/** The value an option gets: real material where TLS must parse it, else a sentinel of its own. */
function valueFor(option: SecretOption): unknown {
  const last = option.path.split('.').at(-1)!;
  if (last === 'ca') return { file: path.join(TLS_DIR, 'ca.crt') };
  if (last === 'cert') return { file: path.join(TLS_DIR, 'client.crt') };
  if (last === 'key') return { file: path.join(TLS_DIR, 'client.key') };
  if (last === 'pfx') return { file: path.join(state.work!, 'client.p12') };
  // The bundle's own password: any other text fails TLS ("mac verify failure") before the rest is resolved.
  if (option.path === 'client.ssl.passphrase') return secret(PFX_PASSPHRASE);
  return secret(sentinel(`${option.mechanism ?? ''}${option.path}`));
}

async function writeDefinition(name: string, definition: Record<string, unknown>): Promise<string> {
  const file = path.join(state.work!, `${name}.json`);
  await fsp.writeFile(file, JSON.stringify(definition, null, 2));
  return file;
}

async function cli(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<string> {
  try {
    const { stdout, stderr } = await run(BIN, [...args], {
      env: { ...process.env, ...env },
      timeout: 120_000,
    });
    return stdout + stderr;
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string };
    return `${e.stdout ?? ''}${e.stderr ?? ''}${e.message}`;
  }
}

function expectNoSecretIn(texts: readonly string[]): void {
  const all = texts.join('\n');
  const leaked = [...secretTexts].filter((s) => all.includes(s));
  expect(leaked).toEqual([]);
}

test('the options found in the schema include every section that holds secrets', () => {
  const paths = new Set(secretOptions().map((o) => o.path));
  for (const p of [
    'client.ssl.key',
    'client.ssl.passphrase',
    'client.sasl.password',
    'client.sasl.sessionToken',
    'lance.storageOptions.<name>',
    'schemaRegistry.basicAuth.password',
    'schemaRegistry.ssl.key',
  ])
    expect(paths).toContain(p);
});

test('no secret option value is shown: a run with a dead letter and a store outage, a run whose registry is down, validate and inspect', async () => {
  const admin = state.admin!;
  const options = secretOptions();
  for (const f of ['ca.crt', 'client.crt', 'client.key']) material(path.join(TLS_DIR, f));
  const passphrase = secret(PFX_PASSPHRASE);
  clientPfx(passphrase);
  // The SCRAM-SHA-512 user the run authenticates as: its name and password are sentinels.
  const user = secret(sentinel('scramuser'));
  const password = secret(sentinel('scrampassword'));
  setScramUser(user, password, 'SCRAM-SHA-512');
  secret(s3Env.S3_LOCAL_ACCESS_KEY_ID);
  secret(s3Env.S3_LOCAL_SECRET_ACCESS_KEY);

  const topic = uniqueName('secrets');
  const dlq = `${topic}-dlq`;
  await ensureTopicsServed(admin, [
    { topic, numPartitions: 1 },
    { topic: dlq, numPartitions: 1 },
  ]);
  const ssl = {
    ca: { file: path.join(TLS_DIR, 'ca.crt') },
    cert: { file: path.join(TLS_DIR, 'client.crt') },
    key: { file: path.join(TLS_DIR, 'client.key') },
    pfx: { file: path.join(state.work!, 'client.p12') },
    passphrase: '${env:SSL_PASSPHRASE}',
  };
  const sasl = {
    mechanism: 'scram-sha-512',
    username: '${env:KAFKA_USERNAME}',
    password: { file: 'kafka-password' },
  };
  await fsp.writeFile(path.join(state.work!, 'kafka-password'), password);
  const env = { SSL_PASSPHRASE: passphrase, KAFKA_USERNAME: user };
  const name = uniqueName('secrets').replace(/[^A-Za-z0-9_-]/g, '');
  const storeOptions = {
    endpoint: `http://127.0.0.1:${S3_PORT}`,
    region: 'us-east-1',
    allow_http: 'true',
    aws_access_key_id: s3Env.S3_LOCAL_ACCESS_KEY_ID,
    aws_secret_access_key: s3Env.S3_LOCAL_SECRET_ACCESS_KEY,
  };
  const runFile = await writeDefinition(name, {
    name,
    topics: [topic],
    schema: 'infer',
    client: { ssl, sasl },
    lance: { uri: `s3://${BUCKET}/${name}`, storageOptions: storeOptions, commits: 'atomic' },
    deadLetter: { topic: dlq },
    errors: { tolerance: 'all' },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
    durabilityIntervalMs: 200,
    sessionTimeoutMs: 6000,
    heartbeatIntervalMs: 500,
  });
  shown.push(await cli(['validate', '-c', runFile], env));

  // 1. Start, records, a dead letter; the store goes away and comes back; stop.
  const producer = kafka.producer();
  await producer.connect();
  const send = (values: string[]) =>
    producer.send({ topic, acks: -1, messages: values.map((value) => ({ value })) });
  await send(['{"n":0}', 'not json', '{"n":1}']);
  const dataDir = await tempDir('secrets-run');
  const replica = new ReplicaProcess(runFile, dataDir, [SECURED.saslSsl], env);
  try {
    await replica.waitForEvent('publication', 120_000);
    s3('stop');
    await send(['{"n":2}']);
    await replica.waitFor((l) => l.event === 'publication.failed', 120_000);
    shown.push(await replica.metricsText());
    s3('start');
    await replica.waitFor((l) => l.event === 'publication' && (l.time ?? 0) > Date.now() - 60_000, 120_000);
    shown.push(await replica.metricsText());
    expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  } finally {
    await producer.disconnect();
    shown.push(JSON.stringify(replica.logs), replica.stderr.join('\n'));
  }
  shown.push(await cli(['inspect', '-c', runFile, '--data-dir', dataDir, '--brokers', SECURED.saslSsl], env));

  // The dead letter, its headers and value as a DLQ reader sees them.
  const letters: { headers: IHeaders; value: string }[] = [];
  const reader = kafka.consumer({ groupId: uniqueName('secrets-dlq') });
  await reader.connect();
  await reader.subscribe({ topic: dlq, fromBeginning: true });
  await new Promise<void>((resolve) => {
    void reader.run({
      eachMessage: ({ message }) => {
        letters.push({ headers: message.headers ?? {}, value: message.value?.toString() ?? '' });
        if (letters.length >= 1) resolve();
        return Promise.resolve();
      },
    });
  });
  await reader.disconnect();
  expect(letters[0]?.value).toBe('not json');
  shown.push(
    JSON.stringify(
      letters.map((l) =>
        Object.fromEntries(
          Object.entries(l.headers).map(([k, v]) => [k, Buffer.isBuffer(v) ? v.toString() : v]),
        ),
      ),
    ),
  );

  // 2. A registry format whose registry is down from the start, user info in its URL.
  const registryName = `${name}r`;
  const registryUser = secret(sentinel('urluser'));
  const registryPassword = secret(sentinel('urlpassword'));
  const registryTopic = uniqueName('secrets-avro');
  await ensureTopicsServed(admin, [{ topic: registryTopic, numPartitions: 1 }]);
  const registryFile = await writeDefinition(registryName, {
    name: registryName,
    topics: [registryTopic],
    format: 'avro',
    schema: 'infer',
    schemaRegistry: {
      url: `https://${registryUser}:${registryPassword}@${DOWN_REGISTRY}`,
      basicAuth: {
        username: valueFor({ path: 'schemaRegistry.basicAuth.username' }),
        password: valueFor({ path: 'schemaRegistry.basicAuth.password' }),
      },
      ssl: { ca: ssl.ca, cert: ssl.cert, key: ssl.key },
      requestTimeoutMs: 1000,
    },
    client: { ssl, sasl },
    deadLetter: { file: path.join(state.work!, `${registryName}.dlq.jsonl`) },
    errors: { tolerance: 'all' },
    durabilityIntervalMs: 200,
  });
  shown.push(await cli(['validate', '-c', registryFile], env));
  const framed = Buffer.concat([Buffer.from([0, 0, 0, 0, 1]), Buffer.from([2])]);
  const registryProducer = kafka.producer();
  await registryProducer.connect();
  const registryDir = await tempDir('secrets-registry');
  // The record that is no wire format first, alone: a batch waits whole for the registry.
  await registryProducer.send({
    topic: registryTopic,
    acks: -1,
    messages: [{ value: Buffer.from('no magic byte') }],
  });
  const waiting = new ReplicaProcess(registryFile, registryDir, [SECURED.saslSsl], env);
  try {
    const letterFile = path.join(state.work!, `${registryName}.dlq.jsonl`);
    for (let i = 0; i < 400 && !(await fsp.readFile(letterFile, 'utf8').catch(() => '')); i++)
      await new Promise((r) => setTimeout(r, 300));
    await registryProducer.send({ topic: registryTopic, acks: -1, messages: [{ value: framed }] });
    await registryProducer.disconnect();
    const unreachable = await waiting.waitForEvent('schema-registry.unreachable', 120_000);
    expect(unreachable.url).toBe(`https://[redacted]@${DOWN_REGISTRY}`);
    shown.push(await waiting.metricsText());
    expect(await waiting.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  } finally {
    shown.push(JSON.stringify(waiting.logs), waiting.stderr.join('\n'));
  }
  shown.push(await fsp.readFile(path.join(state.work!, `${registryName}.dlq.jsonl`), 'utf8'));

  // 3. Every secret option the schema has, each SASL mechanism's too, through validate and
  // inspect. A mechanism's own options come from the environment, so that validate's
  // success proves they were resolved (a reference left unresolved fails it).
  const mechanisms = [...new Set(options.flatMap((o) => (o.mechanism ? [o.mechanism] : [])))];
  expect(options).toContainEqual({ path: 'client.sasl.sessionToken', mechanism: 'aws' });
  for (const mechanism of mechanisms) {
    const definition: Record<string, unknown> = {
      name: `${name}${mechanism.replace(/\W/g, '')}`,
      topics: [topic],
      format: 'avro',
      schema: 'infer',
      schemaRegistry: { url: `https://${registryUser}:${registryPassword}@${DOWN_REGISTRY}` },
      lance: { uri: `s3://${BUCKET}/${name}`, commits: 'atomic' },
      client: { sasl: { mechanism } },
    };
    const mechanismEnv: NodeJS.ProcessEnv = {};
    for (const option of options) {
      if (option.mechanism !== undefined && option.mechanism !== mechanism) continue;
      const value = valueFor(option);
      if (option.mechanism === undefined || typeof value !== 'string') setAt(definition, option.path, value);
      else {
        const variable = `KL_SECRET_${option.path.replace(/\W/g, '_')}`;
        mechanismEnv[variable] = value;
        setAt(definition, option.path, `\${env:${variable}}`);
      }
    }
    setAt(definition, 'lance.storageOptions.endpoint', `http://127.0.0.1:${S3_PORT}`);
    const file = await writeDefinition(`${name}-${mechanism}`, definition);
    const validated = await cli(['validate', '-c', file], mechanismEnv);
    // The success line, not "invalid consumer definition …" (which contains "valid" too).
    expect(validated).toMatch(/: valid — consumer /);
    expect(validated).not.toMatch(/invalid/);
    shown.push(validated);
    const inspected = await cli(
      ['inspect', '-c', file, '--brokers', SECURED.saslSsl, '--data-dir', registryDir],
      mechanismEnv,
    );
    expect(inspected).not.toMatch(/invalid consumer definition/);
    shown.push(inspected);
  }

  expect(shown.join('\n')).toContain('[redacted]');
  expectNoSecretIn(shown);
}, 600_000);
