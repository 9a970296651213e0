import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { processIdentity } from '../../src/common/process-identity';
import { leasedLocalServer } from '../support/leased-local-server';

/**
 * The hazard: a jest worker killed while it held a lease or the lease lock leaves files
 * naming its pid, and that pid soon belongs to another process. Trusting the pid, the
 * next suite waited three minutes on the lock and failed, and the server was never
 * stopped. A file names its process by pid and start ticks.
 */
const work = mkdtempSync(path.join(os.tmpdir(), 'kl-leases-'));
const leases = path.join(work, 'jest-leases');
const calls: string[] = [];
// The process that has the dead worker's pid now.
const other = spawn('sleep', ['120']);

beforeAll(() => {
  const ticks = processIdentity(other.pid!)?.startTicks;
  expect(ticks).toEqual(expect.any(Number));
  const deadWorker = `${other.pid} ${ticks! - 1}`;
  mkdirSync(path.join(leases, 'lock'), { recursive: true });
  writeFileSync(path.join(leases, 'lock', 'owner'), deadWorker);
  writeFileSync(path.join(leases, `${other.pid}-dead.lease`), deadWorker);
});

afterAll(() => {
  // The dead worker's lease was pruned, so this suite, the last holder, stopped the server.
  expect(calls).toEqual(['status', 'start', 'stop']);
  expect(other.exitCode).toBeNull();
  other.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

describe('a suite after a killed worker whose pid another process has now', () => {
  leasedLocalServer({
    work,
    label: 'a fake server',
    run: (command) => {
      calls.push(command);
      return { code: command === 'status' ? 3 : 0, output: '' };
    },
  });

  test('takes the lease lock over at once and starts the server', () => {
    expect(calls).toEqual(['status', 'start']);
  });
});
