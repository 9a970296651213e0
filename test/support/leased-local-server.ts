import { promises as fsp } from 'node:fs';
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
      const stopped = server.run('stop');
      if (stopped.code !== 0) throw new Error(`could not stop ${server.label}:\n${stopped.output}`);
      await fsp.rm(startedMarker, { force: true });
    });
  }, 60_000);
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
