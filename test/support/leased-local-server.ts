import { createHash } from 'node:crypto';
import { promises as fsp, readdirSync, readFileSync, rmSync } from 'node:fs';
import * as path from 'node:path';
import { ulid } from 'ulid';
import { processIdentity, sameProcess } from '../../src/common/process-identity';

export interface LocalServerScript {
  /** The folder the server's script keeps its run files in; the leases go beside them. */
  readonly work: string;
  /** What the server is, for errors ("the local S3 server"). */
  readonly label: string;
  /** Runs the server's deploy script: `status` exits 0 when it is up. */
  readonly run: (command: 'start' | 'stop' | 'status') => { code: number; output: string };
  /** How long a start may take (a first use installs the server): 180 s unless given. */
  readonly startTimeoutMs?: number;
  /**
   * The deploy script and the variables that stop the server from another process: given,
   * a server jest started is left running after its last suite and stopped by jest's
   * global teardown (see `lingeringServersDir`).
   */
  readonly stopCommand?: StopCommand;
}

export interface StopCommand {
  readonly script: string;
  readonly env: Readonly<Record<string, string>>;
}

/** What the global teardown stops: a server left running by its last suite. */
interface LingeringServer {
  readonly label: string;
  readonly stop: StopCommand;
  /** The marker saying jest started it, removed once it is stopped. */
  readonly startedMarker: string;
}

/**
 * Where suites record the servers they leave running, set by jest's global setup. A
 * server's suites rarely overlap (jest runs the slowest files first), so without it each
 * suite of a server started and stopped it again: a JVM's start, 4-11 s, per suite.
 */
export const LINGERING_SERVERS_ENV = 'KAFKA_LANCE_TEST_LINGERING_SERVERS';

export function lingeringServersDir(): string | undefined {
  return process.env[LINGERING_SERVERS_ENV] || undefined;
}

/**
 * Starts a local server for a suite unless it already runs, and stops it after the
 * suite only if a suite started it and no other suite still uses it. Suites run in
 * parallel jest workers (separate processes), so the bookkeeping is on disk, next to
 * the server's run files: one lease file per suite, changed under a mkdir lock.
 */
export function leasedLocalServer(server: LocalServerScript): void {
  const leases = path.join(server.work, 'jest-leases');
  const startedMarker = path.join(leases, 'started-by-jest');
  const lease = path.join(leases, `${process.pid}-${ulid()}.lease`);

  beforeAll(async () => {
    await fsp.mkdir(leases, { recursive: true });
    await withLock(leases, async () => {
      await fsp.writeFile(lease, thisProcess());
      if (server.run('status').code === 0) return;
      const started = server.run('start');
      if (started.code !== 0) throw new Error(`could not start ${server.label}:\n${started.output}`);
      await fsp.writeFile(startedMarker, String(process.pid));
    });
  }, server.startTimeoutMs ?? 180_000);

  afterAll(async () => {
    await withLock(leases, async () => {
      await fsp.rm(lease, { force: true });
      if (await othersHoldLeases(leases)) return;
      if (!(await exists(startedMarker))) return;
      const lingering = lingeringServersDir();
      if (lingering !== undefined && server.stopCommand !== undefined) {
        // A later suite finds it running and leases it as it is; the teardown stops it.
        const record: LingeringServer = { label: server.label, stop: server.stopCommand, startedMarker };
        const name = `${createHash('sha256').update(server.work).digest('hex').slice(0, 16)}.json`;
        await fsp.writeFile(path.join(lingering, name), JSON.stringify(record));
        return;
      }
      const stopped = server.run('stop');
      if (stopped.code !== 0) throw new Error(`could not stop ${server.label}:\n${stopped.output}`);
      await fsp.rm(startedMarker, { force: true });
    });
  }, 60_000);
}
/**
 * Stops the servers suites left running (jest's global teardown, after every suite):
 * what each stop said, for the log. A server another jest run leases meanwhile (one more
 * run in the same checkout shares its run files) is left to that run's last suite, which
 * finds the started marker and stops it or records it in turn. A failed stop is said too,
 * never thrown: the tests' verdict is made by then.
 */
export async function stopLingeringServers(
  dir: string,
  run: (stop: StopCommand) => { code: number; output: string },
): Promise<string[]> {
  const said: string[] = [];
  for (const name of readdirSync(dir).filter((n) => n.endsWith('.json'))) {
    const server = JSON.parse(readFileSync(path.join(dir, name), 'utf8')) as LingeringServer;
    const leases = path.dirname(server.startedMarker);
    said.push(
      await withLock(leases, async () => {
        if (await othersHoldLeases(leases))
          return `${server.label}: left running, another jest run leases it`;
        const stopped = run(server.stop);
        if (stopped.code === 0) rmSync(server.startedMarker, { force: true });
        return `${server.label}: ${stopped.code === 0 ? 'stopped' : `stop failed: ${stopped.output}`}`;
      }),
    );
  }
  rmSync(dir, { recursive: true, force: true });
  return said;
}

/** Leases of live processes; a lease whose process died (a killed jest worker) is pruned. */
async function othersHoldLeases(dir: string): Promise<boolean> {
  let live = false;
  for (const name of await fsp.readdir(dir)) {
    if (!name.endsWith('.lease')) continue;
    const file = path.join(dir, name);
    if (runs(await fsp.readFile(file, 'utf8').catch(() => ''))) live = true;
    else await fsp.rm(file, { force: true });
  }
  return live;
}

/** This process as lease and lock files name it: pid and start ticks (a dead worker's pid is soon another's). */
function thisProcess(): string {
  return `${process.pid} ${processIdentity(process.pid)?.startTicks ?? ''}`;
}

/** Whether the process a lease or lock file names (`thisProcess`, or a bare pid) still runs. */
function runs(named: string): boolean {
  const [pid, ticks] = named.trim().split(' ');
  const now = Number(pid) > 0 ? processIdentity(Number(pid)) : undefined;
  return now !== undefined && sameProcess({ startTicks: ticks ? Number(ticks) : undefined }, now);
}

async function withLock<T>(dir: string, fn: () => Promise<T>): Promise<T> {
  const lock = path.join(dir, 'lock');
  for (let attempt = 0; ; attempt++) {
    try {
      await fsp.mkdir(lock);
      await fsp.writeFile(path.join(lock, 'owner'), thisProcess());
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      // A lock left by a killed worker would block every later suite: take it over.
      // An owner not written yet (the taker is between its mkdir and its write) is waited for.
      const owner = (await fsp.readFile(path.join(lock, 'owner'), 'utf8').catch(() => '')).trim();
      if (owner !== '' && !runs(owner)) await fsp.rm(lock, { recursive: true, force: true });
      else if (attempt > 1_800) throw new Error(`${lock} held by ${owner || 'a process'} for over 3 minutes`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  try {
    return await fn();
  } finally {
    await fsp.rm(lock, { recursive: true, force: true });
  }
}

async function exists(file: string): Promise<boolean> {
  return fsp.access(file).then(
    () => true,
    () => false,
  );
}
