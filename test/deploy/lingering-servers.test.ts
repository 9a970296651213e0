import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  LINGERING_SERVERS_ENV,
  leasedLocalServer,
  stopLingeringServers,
  type StopCommand,
} from '../support/leased-local-server';

/**
 * The hazard: a server left running after its last suite (so that the next suite of it
 * does not pay its start again) must still be stopped at the end of the run, by the
 * command recorded for it, and only once jest's teardown asks; a server without a stop
 * command is stopped after its last suite as before.
 */
const work = mkdtempSync(path.join(os.tmpdir(), 'kl-lingering-'));
const lingering = path.join(work, 'lingering');
const calls: string[] = [];
const saved = process.env[LINGERING_SERVERS_ENV];
const stop: StopCommand = { script: '/deploy/fake-server', env: { FAKE_PORT: '1' } };

beforeAll(() => {
  mkdirSync(lingering);
});

afterAll(async () => {
  // The suite below was the server's last: it left it running, recorded for the teardown.
  expect(calls).toEqual(['status', 'start']);
  const marker = path.join(work, 'server', 'jest-leases', 'started-by-jest');
  expect(existsSync(marker)).toBe(true);
  expect(readdirSync(lingering)).toHaveLength(1);

  const stops: StopCommand[] = [];
  const said = await stopLingeringServers(lingering, (command) => {
    stops.push(command);
    return { code: 0, output: '' };
  });
  expect(stops).toEqual([stop]);
  expect(said).toEqual(['a fake server: stopped']);
  expect(existsSync(marker)).toBe(false);
  expect(existsSync(lingering)).toBe(false);

  if (saved === undefined) delete process.env[LINGERING_SERVERS_ENV];
  else process.env[LINGERING_SERVERS_ENV] = saved;
  rmSync(work, { recursive: true, force: true });
});

describe('a suite of a server with a stop command, the last to lease it', () => {
  beforeAll(() => {
    process.env[LINGERING_SERVERS_ENV] = lingering;
  });

  leasedLocalServer({
    work: path.join(work, 'server'),
    label: 'a fake server',
    run: (command) => {
      calls.push(command);
      return { code: command === 'status' ? 3 : 0, output: '' };
    },
    stopCommand: stop,
  });

  test('starts the server', () => {
    expect(calls).toEqual(['status', 'start']);
  });
});

test("the teardown leaves a server another jest run leases meanwhile (that run's last suite stops it)", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kl-lingering-leased-'));
  const leases = path.join(dir, 'server', 'jest-leases');
  mkdirSync(leases, { recursive: true });
  const marker = path.join(leases, 'started-by-jest');
  writeFileSync(marker, '1');
  // A suite of another run in this checkout holds a lease: this process stands for it.
  writeFileSync(path.join(leases, `${process.pid}-other.lease`), String(process.pid));
  const records = path.join(dir, 'lingering');
  mkdirSync(records);
  writeFileSync(
    path.join(records, 'a.json'),
    JSON.stringify({ label: 'a shared server', stop, startedMarker: marker }),
  );
  const stops: StopCommand[] = [];
  const said = await stopLingeringServers(records, (command) => {
    stops.push(command);
    return { code: 0, output: '' };
  });
  expect(stops).toEqual([]);
  expect(said).toEqual(['a shared server: left running, another jest run leases it']);
  expect(existsSync(marker)).toBe(true);
  rmSync(dir, { recursive: true, force: true });
});
