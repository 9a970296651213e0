import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import { FaultVariableError, NO_FAULTS, parseFaults, type Faults } from '../../src/faults/faults';
import { shareFaults, threadFaults } from '../../src/faults/thread-faults';
import { runBounded } from '../support/run-bounded';

const BIN = path.resolve(__dirname, '../../bin/kafka-lance');

describe('parseFaults', () => {
  test('a process started without test variables has no fault', () => {
    expect(parseFaults({ PATH: '/bin' })).toEqual(NO_FAULTS);
  });

  test('every test variable becomes its typed fault', () => {
    expect(
      parseFaults({
        KAFKA_LANCE_TEST_CRASH_AT: 'after-add',
        KAFKA_LANCE_TEST_STOP_AT: 'before-add',
        KAFKA_LANCE_TEST_KILL_AT_COMMIT: '5',
        KAFKA_LANCE_TEST_RECOVERY_DELAY_MS: '3000',
        KAFKA_LANCE_TEST_BLOCK_LOOP_AT: '3:100, 7:2000',
        KAFKA_LANCE_TEST_BLOCK_LOOP_ON_SIGNAL: '12000',
        KAFKA_LANCE_TEST_FAIL_FIRST_CLAIM: 'commit',
        KAFKA_LANCE_TEST_DISK_FULL_STAGING: '/tmp/staging.flag',
        KAFKA_LANCE_TEST_DISK_FULL_LANCE: '/tmp/lance.flag',
        KAFKA_LANCE_TEST_MAX_CHAIN_BYTES: '260',
        KAFKA_LANCE_TEST_LOSE_COORDINATOR_AT: '3',
      }),
    ).toEqual<Faults>({
      crashAt: 'after-add',
      stopAt: 'before-add',
      killAtCommit: 5,
      recoveryDelayMs: 3000,
      blockLoopAt: [
        { batch: 3, ms: 100 },
        { batch: 7, ms: 2000 },
      ],
      blockLoopOnSignalMs: 12000,
      failFirstClaim: 'commit',
      diskFullFlags: { staging: '/tmp/staging.flag', lance: '/tmp/lance.flag' },
      maxChainBytes: 260,
      loseCoordinatorAt: 3,
    });
  });

  test('an empty variable is unset (a restart clears a crash point that way)', () => {
    expect(parseFaults({ KAFKA_LANCE_TEST_CRASH_AT: '', KAFKA_LANCE_TEST_KILL_AT_COMMIT: '' })).toEqual(
      NO_FAULTS,
    );
  });

  test.each([
    ['KAFKA_LANCE_TEST_CRASH_AT', 'after-ad'],
    ['KAFKA_LANCE_TEST_STOP_AT', 'nowhere'],
    ['KAFKA_LANCE_TEST_KILL_AT_COMMIT', '0'],
    ['KAFKA_LANCE_TEST_RECOVERY_DELAY_MS', 'soon'],
    ['KAFKA_LANCE_TEST_BLOCK_LOOP_AT', '3-100'],
    ['KAFKA_LANCE_TEST_BLOCK_LOOP_ON_SIGNAL', '-5'],
    ['KAFKA_LANCE_TEST_FAIL_FIRST_CLAIM', 'join'],
    ['KAFKA_LANCE_TEST_MAX_CHAIN_BYTES', '4096'],
    ['KAFKA_LANCE_TEST_LOSE_COORDINATOR_AT', '0'],
  ])('a bad value of %s stops the start, naming the variable', (variable, value) => {
    const parse = () => parseFaults({ [variable]: value });
    expect(parse).toThrow(FaultVariableError);
    expect(parse).toThrow(new RegExp(`^${variable} must be .*, not "${value}"$`));
  });
});

test('kafka-lance run with a bad fault variable stops before it starts, naming the variable', () => {
  const out = runBounded(
    process.execPath,
    [BIN, 'run', '-c', path.resolve(__dirname, '../../consumers/app-logs.ts'), '--brokers', '127.0.0.1:1'],
    { env: { ...process.env, KAFKA_LANCE_TEST_CRASH_AT: 'after-lunch' }, timeoutMs: 60_000 },
  );
  expect(out.status).toBe(1);
  expect(out.stderr).toMatch(
    /^kafka-lance: KAFKA_LANCE_TEST_CRASH_AT must be one of after-plan, .*, not "after-lunch"$/m,
  );
  expect(out.stdout).not.toContain('replica.start');
});

describe('shareFaults', () => {
  afterEach(() => shareFaults(NO_FAULTS));

  test('a worker thread started after the hand-over has the same faults', async () => {
    const faults: Faults = { ...NO_FAULTS, crashAt: 'after-plan', diskFullFlags: { lance: '/tmp/flag' } };
    shareFaults(faults);
    expect(threadFaults()).toEqual(faults);
    const worker = new Worker(
      `const { getEnvironmentData, parentPort } = require('node:worker_threads');
       parentPort.postMessage(getEnvironmentData('kafka-lance.faults'));`,
      { eval: true },
    );
    const seen = await new Promise<unknown>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    await worker.terminate();
    expect(seen).toEqual(faults);
  });
});
