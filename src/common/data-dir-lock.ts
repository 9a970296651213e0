import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { KafkaLanceError } from './errors';
import { mkdirDurably, realDirectorySync } from './fs-durable';
import { processIdentity, sameProcess, type ProcessIdentity } from './process-identity';

/** In the data directory: names the process that owns the directory. */
export const LOCK_FILE = 'kafka-lance.lock';

interface LockContent extends ProcessIdentity {
  readonly pid: number;
  readonly hostname: string;
  readonly startedAt: number;
}

/** Another process (or another replica in this one) owns the data directory. */
export class DataDirLockedError extends KafkaLanceError {
  constructor(dataDir: string, holder: LockContent, reason: string) {
    super(
      'DATA_DIR_LOCKED',
      `data directory ${dataDir} is in use by pid ${holder.pid} on ${holder.hostname} (since ${new Date(holder.startedAt).toISOString()}); ${reason}`,
      {
        context: {
          dataDir,
          pid: holder.pid,
          hostname: holder.hostname,
          lockFile: path.join(dataDir, LOCK_FILE),
        },
      },
    );
  }
}

export interface DataDirLock {
  readonly file: string;
  /** Removes the lock file; only the holder that took it calls this. */
  release(): Promise<void>;
}

/** Lock files this process holds: a lock naming our own pid that is not here is from an earlier life. */
const heldHere = new Set<string>();

/**
 * Takes the data directory for this process, or fails naming the holder. Two
 * replicas on one directory would each plan and publish the other's sealed parts
 * and recover the other's open ones: the staging is single-owner by design.
 *
 * The lock is a file created only if absent (written whole, then hard-linked into
 * place: atomic), holding pid, hostname, start time and the process's identity
 * (boot and start ticks, see process-identity.ts). A lock left by a dead process
 * (SIGKILL, OOM, power loss) is taken over when it names this host and a pid that is
 * gone, or that another process has now (pids are reused), or this process's own pid
 * without this process holding it (a restarted container reuses pids). A lock naming
 * another host is never guessed stale: remove it by hand once that host is known to
 * be gone.
 */
export async function lockDataDir(dataDir: string): Promise<DataDirLock> {
  const dir = path.resolve(dataDir);
  const file = path.join(dir, LOCK_FILE);
  await mkdirDurably(dir);
  const mine: LockContent = {
    pid: process.pid,
    hostname: os.hostname(),
    startedAt: Date.now(),
    ...processIdentity(process.pid),
  };
  for (let attempt = 0; attempt < 5; attempt++) {
    if (await createWhole(file, JSON.stringify(mine))) {
      heldHere.add(file);
      return {
        file,
        release: async () => {
          if (!heldHere.delete(file)) return;
          await fsp.rm(file, { force: true });
          await realDirectorySync.syncDirectory(dir);
        },
      };
    }
    const text = await fsp.readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined; // released meanwhile: try again
      throw error;
    });
    if (text === undefined) continue;
    const holder = parseLock(text);
    if (!holder) {
      // createWhole() never shows a partial lock, so this file is not ours to judge.
      throw new DataDirLockedError(
        dir,
        { pid: -1, hostname: 'an unknown host', startedAt: 0 },
        `${file} is not a kafka-lance lock; remove it if no replica uses this directory`,
      );
    }
    const live = liveHolderReason(file, holder);
    if (live !== undefined) throw new DataDirLockedError(dir, holder, live);
    await takeOver(file, text);
  }
  throw new DataDirLockedError(
    dir,
    parseLock(await fsp.readFile(file, 'utf8').catch(() => '')) ?? { pid: -1, hostname: '?', startedAt: 0 },
    'the lock kept changing hands while this process tried to take it',
  );
}

/**
 * Creates `file` with `content` only if absent. The content is written and fsynced
 * under a temporary name and hard-linked into place (atomic, EEXIST when taken), so a
 * reader never sees a half-written lock that it could mistake for a dead one.
 */
async function createWhole(file: string, content: string): Promise<boolean> {
  const tmp = `${file}.${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}.tmp`;
  const handle = await fsp.open(tmp, 'wx');
  try {
    await handle.writeFile(content);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await fsp.link(tmp, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    await fsp.rm(tmp, { force: true });
  }
  await realDirectorySync.syncDirectory(path.dirname(file));
  return true;
}

/** Why the holder may still be live, or undefined when its lock is stale. */
function liveHolderReason(file: string, holder: LockContent): string | undefined {
  if (holder.hostname !== os.hostname()) {
    return `it may be running on that host; if it is not, remove ${file}`;
  }
  if (holder.pid === process.pid) {
    return heldHere.has(file) ? 'another replica in this process holds it' : undefined;
  }
  const now = processIdentity(holder.pid);
  return now !== undefined && sameProcess(holder, now)
    ? 'stop that process first (one replica per data directory)'
    : undefined;
}

/**
 * Removes a stale lock without removing a fresh one a concurrent starter just wrote
 * in its place: the file is moved aside atomically, then checked to be the stale
 * one that was judged; a fresh lock moved by mistake is put back.
 */
async function takeOver(file: string, staleText: string): Promise<void> {
  const aside = `${file}.stale-${process.pid}-${Date.now()}`;
  try {
    await fsp.rename(file, aside);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return; // someone else took it over
    throw error;
  }
  const moved = await fsp.readFile(aside, 'utf8');
  if (moved !== staleText) await fsp.link(aside, file).catch(() => undefined);
  await fsp.rm(aside, { force: true });
  await realDirectorySync.syncDirectory(path.dirname(file));
}

function parseLock(text: string): LockContent | undefined {
  try {
    const v = JSON.parse(text) as Partial<LockContent>;
    if (typeof v.pid === 'number' && typeof v.hostname === 'string') {
      return {
        pid: v.pid,
        hostname: v.hostname,
        startedAt: typeof v.startedAt === 'number' ? v.startedAt : 0,
        bootId: typeof v.bootId === 'string' ? v.bootId : undefined,
        startTicks: typeof v.startTicks === 'number' ? v.startTicks : undefined,
      };
    }
  } catch {
    // not JSON: torn
  }
  return undefined;
}
