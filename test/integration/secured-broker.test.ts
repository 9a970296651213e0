import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import * as lancedb from '@lancedb/lancedb';
import type { Admin } from 'kafkajs';
import { ensureTopicsServed } from '../../src/kafka/protocol/topic-ready';
import { BIN, ReplicaProcess } from '../../src/harness/replica-process';
import { uniqueName } from '../support/kafka';
import { tempDir } from '../support/rows';
import { SECURED, TLS_DIR, securedBrokerSuite, setScramUser } from '../support/secured-broker';

/**
 * A real replica (`kafka-lance run`) against a real broker's secured listeners, with the
 * example definitions of consumers/examples/security as they are documented
 * (docs/security.md): each mechanism lands records in a Lance table; each bad
 * credential stops the start with exit code 2 and one line naming the cause and option.
 */
const kafka = securedBrokerSuite();
const EXAMPLES = path.resolve(__dirname, '../../consumers/examples/security');
const RECORDS = 3;
const state: { admin?: Admin; work?: string; topic?: string } = {};

beforeAll(async () => {
  state.admin = kafka.admin();
  await state.admin.connect();
  state.work = await tempDir('secured');
  // The examples read tls/… and secrets/… from their definition's folder.
  await fsp.symlink(TLS_DIR, path.join(state.work, 'tls'));
  await fsp.mkdir(path.join(state.work, 'secrets'));
  await fsp.writeFile(path.join(state.work, 'secrets', 'kafka-password'), SECURED.scram512.password);
  state.topic = uniqueName('secured');
  await ensureTopicsServed(state.admin, [{ topic: state.topic, numPartitions: 1 }]);
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({
    topic: state.topic,
    acks: -1,
    messages: Array.from({ length: RECORDS }, (_, n) => ({ value: JSON.stringify({ n, message: `m${n}` }) })),
  });
  await producer.disconnect();
}, 240_000);

afterAll(async () => {
  await ReplicaProcess.killAll();
  await state.admin?.disconnect();
  if (state.work) await fsp.rm(state.work, { recursive: true, force: true });
});

/**
 * A definition beside the example's secrets that takes the example's client section as
 * it is, with this suite's topic, a group of its own and quick publications.
 */
async function definitionFrom(
  example: string,
  client?: Record<string, unknown>,
  topic = state.topic,
): Promise<string> {
  const name = uniqueName(example.replace(/\W/g, '')).replace(/[^A-Za-z0-9_-]/g, '');
  const file = path.join(state.work!, `${name}.ts`);
  await fsp.writeFile(
    file,
    `import example from ${JSON.stringify(path.join(EXAMPLES, `${example}.ts`))};
export default {
  ...example,
  name: ${JSON.stringify(name)},
  topics: [${JSON.stringify(topic)}],
  table: 'logs',
  materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  durabilityIntervalMs: 200,
  sessionTimeoutMs: 6000,
  heartbeatIntervalMs: 500,
  ${client ? `client: { ...example.client, ...${JSON.stringify(client)} },` : ''}
};
`,
  );
  return file;
}

/** Rows in the table so far; 0 while it does not exist or is being created. */
async function rowsIn(dataDir: string): Promise<number> {
  const db = await lancedb.connect(path.join(dataDir, 'lance'), { readConsistencyInterval: 0 });
  try {
    const table = await db.openTable('logs');
    try {
      return await table.countRows();
    } finally {
      table.close();
    }
  } catch {
    return 0;
  } finally {
    db.close();
  }
}

async function landsEveryRecord(example: string, broker: string, env: NodeJS.ProcessEnv = {}): Promise<void> {
  const file = await definitionFrom(example);
  const dataDir = await tempDir(`secured-${example}`);
  const replica = new ReplicaProcess(file, dataDir, [broker], env);
  const deadline = Date.now() + 120_000;
  let rows = 0;
  while ((rows = await rowsIn(dataDir)) < RECORDS && Date.now() < deadline && replica.alive)
    await new Promise((r) => setTimeout(r, 300));
  const exit = await replica.kill('SIGTERM');
  if (rows !== RECORDS)
    throw new Error(`${rows} of ${RECORDS} rows landed; the replica said:\n${replica.tail(30)}`);
  expect(exit).toEqual({ code: 0, signal: null });
  // The start line shows which options are set, never their values.
  const start = replica.logs.find((l) => l.event === 'replica.start');
  const text = JSON.stringify(replica.logs);
  for (const secret of Object.values(env)) if (secret) expect(text).not.toContain(secret);
  expect(JSON.stringify(start?.client)).not.toContain('BEGIN');
  await fsp.rm(dataDir, { recursive: true, force: true });
}

const PLAIN_ENV = { KAFKA_USERNAME: SECURED.plain.username, KAFKA_PASSWORD: SECURED.plain.password };

describe('a replica connects to a secured broker and lands records', () => {
  test('TLS, trusting the broker by the private CA', () => landsEveryRecord('tls', SECURED.tls), 180_000);
  test(
    'mutual TLS, a client certificate the broker requires',
    () => landsEveryRecord('mtls', SECURED.ssl),
    180_000,
  );
  test(
    'SASL PLAIN over TLS, credentials from the environment',
    () => landsEveryRecord('sasl-plain', SECURED.saslSsl, PLAIN_ENV),
    180_000,
  );
  test(
    'SCRAM-SHA-256 over TLS',
    () =>
      landsEveryRecord('sasl-scram-sha-256', SECURED.saslSsl, {
        KAFKA_USERNAME: SECURED.scram256.username,
        KAFKA_PASSWORD: SECURED.scram256.password,
      }),
    180_000,
  );
  test(
    'SCRAM-SHA-512 over TLS, the password from a mounted file',
    () =>
      landsEveryRecord('sasl-scram-sha-512', SECURED.saslSsl, { KAFKA_USERNAME: SECURED.scram512.username }),
    180_000,
  );
  test(
    'OAUTHBEARER with a token provider function',
    () => landsEveryRecord('oauthbearer', SECURED.saslSsl, { KAFKA_OAUTH_SUBJECT: 'kafka-lance-test' }),
    180_000,
  );
});

const run = promisify(execFile);

/** `kafka-lance run` that must stop at start: its exit code and the lines of its stderr. */
async function refusedStart(
  file: string,
  broker: string,
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; stderr: string[]; stdout: string }> {
  const dataDir = await tempDir('secured-refused');
  try {
    await run(BIN, ['run', '-c', file, '--data-dir', dataDir, '--brokers', broker, '--metrics-port', '0'], {
      env: { ...process.env, ...env },
      timeout: 150_000,
    });
    return { code: 0, stderr: [], stdout: '' };
  } catch (error) {
    const e = error as { code?: number | null; stderr?: string; stdout?: string };
    return {
      code: typeof e.code === 'number' ? e.code : null,
      stderr: (e.stderr ?? '').split('\n').filter((l) => l.trim() !== ''),
      stdout: e.stdout ?? '',
    };
  } finally {
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
}

describe('a bad credential stops the start with exit code 2 and one line naming the cause and the option', () => {
  test('a wrong password (SCRAM-SHA-256)', async () => {
    const file = await definitionFrom('sasl-scram-sha-256');
    const wrong = 'not-the-password';
    const result = await refusedStart(file, SECURED.saslSsl, {
      KAFKA_USERNAME: SECURED.scram256.username,
      KAFKA_PASSWORD: wrong,
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toHaveLength(1);
    expect(result.stderr[0]).toMatch(
      /refused the SASL credentials .*invalid credentials.*check client\.sasl\.username and client\.sasl\.password/,
    );
    expect(result.stderr[0] + result.stdout).not.toContain(wrong);
  }, 180_000);

  test('an unknown user (PLAIN)', async () => {
    const file = await definitionFrom('sasl-plain');
    const result = await refusedStart(file, SECURED.saslSsl, {
      KAFKA_USERNAME: 'nobody-here',
      KAFKA_PASSWORD: 'x-password',
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toHaveLength(1);
    expect(result.stderr[0]).toMatch(
      /refused the SASL credentials .*Invalid username or password.*client\.sasl\.username/,
    );
    expect(result.stderr[0] + result.stdout).not.toContain('nobody-here');
  }, 180_000);

  test('a broker certificate from a CA the client does not trust', async () => {
    // ssl: true trusts the system's CAs only, which never signed the test CA.
    const file = await definitionFrom('sasl-plain', { ssl: true });
    const result = await refusedStart(file, SECURED.saslSsl, PLAIN_ENV);
    expect(result.code).toBe(2);
    expect(result.stderr).toHaveLength(1);
    expect(result.stderr[0]).toMatch(
      /certificate is not signed by a trusted CA \(SELF_SIGNED_CERT_IN_CHAIN\); check client\.ssl\.ca/,
    );
  }, 180_000);

  test('an expired client certificate is refused before connecting', async () => {
    const file = await definitionFrom('mtls', {
      ssl: {
        ca: { file: 'tls/ca.crt' },
        cert: { file: 'tls/client-expired.crt' },
        key: { file: 'tls/client-expired.key' },
      },
    });
    const result = await refusedStart(file, SECURED.ssl);
    expect(result.code).toBe(2);
    expect(result.stderr).toHaveLength(1);
    expect(result.stderr[0]).toMatch(/: client\.ssl\.cert: the certificate expired on /);
  }, 180_000);

  test('no client certificate on a listener that requires one', async () => {
    const file = await definitionFrom('tls');
    const result = await refusedStart(file, SECURED.ssl);
    expect(result.code).toBe(2);
    expect(result.stderr).toHaveLength(1);
    expect(result.stderr[0]).toMatch(
      /the broker refused the client certificate \(TLS alert .*\); check client\.ssl\.cert and client\.ssl\.key/,
    );
  }, 180_000);

  test('a TLS client pointed at a listener without TLS', async () => {
    const file = await definitionFrom('tls');
    const result = await refusedStart(file, SECURED.plaintext);
    expect(result.code).toBe(2);
    expect(result.stderr).toHaveLength(1);
    expect(result.stderr[0]).toMatch(/does not speak TLS; check brokers .* or client\.ssl/);
  }, 180_000);
});

async function until<T>(
  read: () => Promise<T | undefined> | T | undefined,
  what: string,
  timeoutMs = 120_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

test('a password rotated under a running replica: it keeps what it staged, warns, sets the metric, retries, lands the rest once accepted again, and stops cleanly while refused', async () => {
  const user = uniqueName('rotating');
  const password = 'first-password-1';
  setScramUser(user, password);
  const topic = uniqueName('rotation');
  await ensureTopicsServed(state.admin!, [{ topic, numPartitions: 1 }]);
  const producer = kafka.producer();
  await producer.connect();
  const produce = (from: number) =>
    producer.send({
      topic,
      acks: -1,
      messages: Array.from({ length: RECORDS }, (_, i) => ({ value: JSON.stringify({ n: from + i }) })),
    });
  await produce(0);
  const file = await definitionFrom('sasl-scram-sha-256', undefined, topic);
  const dataDir = await tempDir('secured-rotation');
  const replica = new ReplicaProcess(file, dataDir, [SECURED.saslSsl], {
    KAFKA_USERNAME: user,
    KAFKA_PASSWORD: password,
  });
  const failing = async () =>
    (await replica.metrics()).find((m) => m.name === 'kafka_lance_broker_authentication_failing')?.value;
  try {
    await until(
      async () => ((await rowsIn(dataDir)) === RECORDS ? true : undefined),
      'the first records land',
    );
    // Rotated on the broker, not in the replica's secret: its next session is refused
    // (the broker ends SCRAM-SHA-256 sessions every 10 s).
    setScramUser(user, 'rotated-password-2');
    const lost = await replica.waitForEvent('kafka.authentication.lost', 90_000);
    expect(lost.msg).toMatch(/refuses this replica: the broker refused the SASL credentials/);
    expect(lost.option).toMatch(/client\.sasl\.password/);
    expect(replica.alive).toBe(true);
    expect(await failing()).toBe(1);
    await produce(RECORDS);
    expect(await rowsIn(dataDir)).toBe(RECORDS);
    // The operator puts the old password back: the retries get in and the rest lands.
    setScramUser(user, password);
    await replica.waitForEvent('kafka.authentication.restored', 120_000);
    await until(async () => ((await rowsIn(dataDir)) === 2 * RECORDS ? true : undefined), 'the rest lands');
    expect(await failing()).toBe(0);
    // Refused again, and stopped while its consumer has no group (between a refusal and
    // the next try): the stop still succeeds (it ended in replica.stop.failed, exit 1).
    const lostBefore = replica.logs.filter((l) => l.event === 'kafka.authentication.lost').length;
    setScramUser(user, 'rotated-password-3');
    await replica.waitFor(
      () => replica.logs.filter((l) => l.event === 'kafka.authentication.lost').length > lostBefore,
      90_000,
    );
    expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
    expect(replica.logs.some((l) => l.event === 'replica.stop.failed')).toBe(false);
    expect(JSON.stringify(replica.logs)).not.toContain(password);
  } finally {
    await producer.disconnect();
    await replica.kill('SIGKILL').catch(() => undefined);
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
}, 400_000);
