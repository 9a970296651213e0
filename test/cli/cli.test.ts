import { spawn } from 'node:child_process';
import { promises as fsp, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { tempDir } from '../support/rows';
import { runBounded } from '../support/run-bounded';

const BIN = path.resolve(__dirname, '../../bin/kafka-lance');
const run = (...args: string[]) =>
  runBounded(process.execPath, [BIN, ...args], {
    env: { ...process.env, KAFKA_BOOTSTRAP_SERVERS: '' },
  });

describe('kafka-lance CLI', () => {
  test('--version prints the version in package.json', async () => {
    const pkg = JSON.parse(await fsp.readFile(path.resolve(__dirname, '../../package.json'), 'utf8')) as {
      version: string;
    };
    const out = run('--version');
    expect(out.status).toBe(0);
    expect(out.stdout.trim()).toBe(pkg.version);
  });

  test('every command has --help with an example', () => {
    for (const command of ['run', 'demo', 'validate', 'produce', 'inspect', 'compact']) {
      const out = run(command, '--help');
      expect(out.status).toBe(0);
      expect(out.stdout).toMatch(/Examples?:/);
      expect(out.stdout).toContain(`kafka-lance ${command}`);
    }
  });

  test("validate's help says a .ts or .js definition runs with the user's privileges, though nothing is connected to", () => {
    const out = run('validate', '--help');
    expect(out.stdout.replace(/\s+/g, ' ')).toContain(
      'validate runs it (and what it imports) with your privileges',
    );
  });

  test('an unknown consumer file is named, with what to pass instead', () => {
    for (const command of ['run', 'validate', 'inspect', 'compact']) {
      const out = run(command, '-c', 'no/such/definition.ts');
      expect(out.status).toBe(2);
      expect(out.stderr).toContain(`${path.resolve('no/such/definition.ts')} does not exist`);
      expect(out.stderr).toContain('-c consumers/app-logs.ts');
    }
  });

  test('compact refuses to commit beside a declared single writer unless told its writer is stopped', async () => {
    const dir = await tempDir('kl-cli-single-writer');
    const file = path.join(dir, 'single.json');
    await fsp.writeFile(
      file,
      JSON.stringify({ name: 'single', topics: ['t'], schema: 'infer', lance: { singleWriter: true } }),
    );
    const out = run('compact', '-c', file, '--data-dir', dir);
    expect(out.status).toBe(2);
    expect(out.stderr).toContain('declares lance.singleWriter');
    expect(out.stderr).toContain('--writers-stopped');
    // Told so, it goes on to the table (none here: nothing has been published).
    const told = run('compact', '-c', file, '--data-dir', dir, '--writers-stopped');
    expect(told.stderr).not.toContain('declares lance.singleWriter');
    expect(told.stderr).toContain('nothing has been published');
    await fsp.rm(dir, { recursive: true, force: true });
  });

  test('an unreachable broker is named by its address', async () => {
    const dir = await tempDir('kl-cli-unreachable');
    const out = run('produce', '--topic', 'x', '--count', '1', '--brokers', '127.0.0.1:1');
    expect(out.status).toBe(1);
    expect(out.stderr).toContain('cannot reach the Kafka broker at 127.0.0.1:1');
    // inspect still reports what is on disk, and says the broker part is missing.
    const app = path.resolve(__dirname, '../../consumers/app-logs.ts');
    const inspect = run('inspect', '-c', app, '--data-dir', dir, '--brokers', '127.0.0.1:1');
    expect(inspect.status).toBe(1);
    expect(inspect.stderr).toContain('cannot reach the Kafka broker at 127.0.0.1:1');
    expect(inspect.stdout).toContain('not created yet (nothing published)');
    await fsp.rm(dir, { recursive: true, force: true });
  }, 60_000);

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
      JSON.stringify({ name: 'x', topics: ['t'], schema: { fields: { a: 'nope' } }, workers: -1 }),
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
  const out = runBounded(process.execPath, [
    BIN,
    'run',
    '-c',
    file,
    '--brokers',
    testBrokers().join(','),
    '--data-dir',
    dir,
    '--metrics-port',
    '0',
  ]);
  expect(out.status).toBe(2);
  expect(out.stderr).toContain(`topics: ${topic} does not exist`);
  await fsp.rm(dir, { recursive: true, force: true });
});

test('a SIGTERM while the program is still loading stops it gracefully (exit 0), as a running replica is stopped', async () => {
  const { testBrokers, testKafka, uniqueName } = await import('../support/kafka');
  const dir = await tempDir('kl-cli-early-stop');
  const topic = uniqueName('early-stop');
  const admin = testKafka().admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
  await admin.disconnect();
  const file = path.join(dir, 'early.json');
  await fsp.writeFile(file, JSON.stringify({ name: uniqueName('early'), topics: [topic], schema: 'infer' }));
  const args = [
    BIN,
    'run',
    '-c',
    file,
    '--brokers',
    testBrokers().join(','),
    '--data-dir',
    dir,
    '--metrics-port',
    '0',
  ];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  // The moment LanceDB's native module is mapped: the program's modules are loading,
  // well before the replica's own handlers go in (Node's own SIGTERM handler, there from
  // the start, only restores the terminal and dies by the signal).
  const loadingLance = () => readFileSync(`/proc/${child.pid!}/maps`, 'utf8').includes('lancedb');
  for (let i = 0; i < 5_000 && !loadingLance(); i++) await new Promise((r) => setTimeout(r, 1));
  expect(output).not.toContain('metrics.listening'); // still loading
  child.kill('SIGTERM');
  expect(await exited).toEqual({ code: 0, signal: null });
  expect(output).toContain('replica.signal');
  await fsp.rm(dir, { recursive: true, force: true });
}, 120_000);

test('demo: logs go to a file; the terminal shows progress and a summary read back from Lance', async () => {
  const { testBrokers } = await import('../support/kafka');
  const dir = await tempDir('kl-demo');
  const out = runBounded(
    process.execPath,
    [BIN, 'demo', '--seconds', '3', '--rate', '1000', '--data-dir', dir],
    {
      env: { ...process.env, KAFKA_BOOTSTRAP_SERVERS: testBrokers().join(',') },
    },
  );
  expect(out.stderr).toBe('');
  expect(out.status).toBe(0);
  const lines = out.stdout.split('\n');
  // No JSON log line reaches the terminal.
  expect(lines.filter((l) => l.trim().startsWith('{'))).toEqual([]);
  const produced = /^Produced +(\d+) log lines to app-logs \((\d+) broken on purpose\)/m.exec(out.stdout);
  const dead = /^Dead letters +(\d+) records in app-logs\.dlq/m.exec(out.stdout);
  const published = /^Published +(\d+) rows of this run into the Lance table app_logs/m.exec(out.stdout);
  expect(produced && dead && published).toBeTruthy();
  expect(Number(produced![1])).toBe(3_000);
  expect(Number(dead![1])).toBe(Number(produced![2]));
  expect(Number(published![1])).toBe(Number(produced![1]) - Number(dead![1]));
  expect(out.stdout).toMatch(/^Check .*: yes$/m);
  expect(out.stdout).toMatch(/^Duplicates +0 rows/m);
  expect(out.stdout).toMatch(/^By level +error \d+ +info \d+ +warn \d+$/m);
  expect(lines.filter((l) => /^ {2}\d{4}-.*app-logs\[\d\]@\d+/.test(l))).toHaveLength(5);
  const table = path.join(dir, 'lance', 'app_logs.lance');
  expect(out.stdout).toContain(`python3 -c "import lance; print(lance.dataset('${table}').count_rows())"`);
  const logFile = /^Logs +(\S+)$/m.exec(out.stdout)![1]!;
  expect(logFile.startsWith(path.join(dir, 'logs'))).toBe(true);
  const logged = (await fsp.readFile(logFile, 'utf8')).trim().split('\n');
  expect(logged.length).toBeGreaterThan(3);
  for (const l of logged) expect(() => JSON.parse(l) as unknown).not.toThrow();
  await fsp.rm(dir, { recursive: true, force: true });
}, 180_000);
