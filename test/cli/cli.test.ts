import { spawnSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { tempDir } from '../support/rows';

const BIN = path.resolve(__dirname, '../../bin/kafka-lance');
const run = (...args: string[]) =>
  spawnSync(process.execPath, [BIN, ...args], {
    encoding: 'utf8',
    env: { ...process.env, KAFKA_BOOTSTRAP_SERVERS: '' },
  });

describe('kafka-lance CLI', () => {
  test('run --help explains every option', () => {
    const out = run('run', '--help');
    expect(out.status).toBe(0);
    for (const option of ['--consumer', '--brokers', '--data-dir', '--log-level'])
      expect(out.stdout).toContain(option);
    expect(out.stdout).toContain('SIGTERM');
  });

  test('validate accepts the shipped app-logs definition', () => {
    const out = run('validate', '-c', path.resolve(__dirname, '../../consumers/app-logs.ts'));
    expect(out.status).toBe(0);
    expect(out.stdout).toContain('consumer app-logs');
  });

  test('a bad definition fails at start with exit code 2 and the fields named', async () => {
    const dir = await tempDir('kl-cli');
    const file = path.join(dir, 'bad.json');
    await fsp.writeFile(
      file,
      JSON.stringify({ name: 'x', topics: ['t'], schema: { fields: { a: 'nope' } }, workers: 0 }),
    );
    const out = run('run', '-c', file, '--brokers', '127.0.0.1:1');
    expect(out.status).toBe(2);
    expect(out.stderr).toContain('workers');
    expect(out.stderr).toContain('schema.fields.a');
    await fsp.rm(dir, { recursive: true, force: true });
  });
});

test('a topic that does not exist fails at start with exit code 2, naming it', async () => {
  const { testBrokers, uniqueName } = await import('../support/kafka');
  const dir = await tempDir('kl-cli-topic');
  const file = path.join(dir, 'missing.json');
  const topic = uniqueName('nowhere');
  await fsp.writeFile(file, JSON.stringify({ name: 'missing', topics: [topic], schema: 'infer' }));
  const out = spawnSync(
    process.execPath,
    [BIN, 'run', '-c', file, '--brokers', testBrokers().join(','), '--data-dir', dir, '--metrics-port', '0'],
    { encoding: 'utf8' },
  );
  expect(out.status).toBe(2);
  expect(out.stderr).toContain(`topics: ${topic} does not exist`);
  await fsp.rm(dir, { recursive: true, force: true });
});

test('demo: produces app logs, publishes the good ones into Lance, dead-letters the broken ones, and says so', async () => {
  const { testBrokers } = await import('../support/kafka');
  const dir = await tempDir('kl-demo');
  const out = spawnSync(
    process.execPath,
    [BIN, 'demo', '--seconds', '3', '--rate', '1000', '--data-dir', dir, '--log-level', 'error'],
    {
      encoding: 'utf8',
      env: {
        ...process.env,
        KAFKA_BOOTSTRAP_SERVERS: testBrokers().join(','),
        KAFKA_LANCE_METRICS_PORT: '0',
      },
    },
  );
  expect(out.status).toBe(0);
  const produced = /Produced (\d+) log lines \((\d+) broken/.exec(out.stdout);
  const published = /Published (\d+) rows into the Lance table app_logs/.exec(out.stdout);
  const dead = /(\d+) records went to app-logs\.dlq/.exec(out.stdout);
  expect(produced && published && dead).toBeTruthy();
  expect(Number(produced![1])).toBe(3_000);
  expect(Number(published![1])).toBe(Number(produced![1]) - Number(produced![2]));
  expect(Number(dead![1])).toBe(Number(produced![2]));
  expect(out.stdout).toContain(path.join(dir, 'lance'));
  await fsp.rm(dir, { recursive: true, force: true });
}, 180_000);
