import { execFileSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import type { DiskStage } from '../../src/common/errors';
import { shareFaults, threadFaults } from '../../src/faults/thread-faults';

/**
 * A small file system of the test's own, to fill and free. Where the
 * machine lets the test mount (root with CAP_SYS_ADMIN) it is a real tmpfs of `bytes`,
 * filled with a filler file; elsewhere it falls back to fault injection at the
 * file-system layer (src/faults/disk-full.ts: while a flag file exists, the stage's
 * writes fail with ENOSPC). `method` says which one ran, for test names and reports.
 */
export interface SmallFs {
  readonly method: 'tmpfs' | 'injection';
  /** The directory to put the staging data dir or the Lance table in. */
  readonly dir: string;
  /** Environment a child process needs to see the injected fault (empty for tmpfs). */
  readonly env: NodeJS.ProcessEnv;
  /** Takes all the space left (tmpfs) or arms the fault (injection). */
  fill(): Promise<void>;
  /** Gives the space back. */
  free(): Promise<void>;
  /** Bytes still free on it (tmpfs), or 0/Infinity (injection). */
  available(): Promise<number>;
  dispose(): Promise<void>;
}

let canMountCache: boolean | undefined;

/** True when this process may mount a tmpfs (tried once, on a scratch directory). */
export async function canMountTmpfs(scratch: string): Promise<boolean> {
  if (canMountCache !== undefined) return canMountCache;
  const probe = path.join(scratch, 'mount-probe');
  await fsp.mkdir(probe, { recursive: true });
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', probe], { stdio: 'ignore' });
    execFileSync('umount', [probe], { stdio: 'ignore' });
    canMountCache = true;
  } catch {
    canMountCache = false;
  }
  await fsp.rm(probe, { recursive: true, force: true });
  return canMountCache;
}

export async function smallFs(
  parent: string,
  stage: DiskStage,
  bytes: number,
  options: { readonly forceInjection?: boolean } = {},
): Promise<SmallFs> {
  const dir = path.join(parent, `small-${stage}`);
  await fsp.mkdir(dir, { recursive: true });
  if (!options.forceInjection && (await canMountTmpfs(parent))) {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${bytes}`, 'tmpfs', dir], { stdio: 'ignore' });
    const filler = path.join(dir, 'filler');
    const available = async () => {
      const s = await fsp.statfs(dir);
      return s.bavail * s.bsize;
    };
    return {
      method: 'tmpfs',
      dir,
      env: {},
      available,
      async fill() {
        // Whatever is left, in 1 MiB writes, until the file system refuses more.
        const handle = await fsp.open(filler, 'a');
        const chunk = Buffer.alloc(1 << 20, 0x5a);
        try {
          for (;;)
            await handle.write(chunk.subarray(0, Math.max(4096, Math.min(chunk.length, await available()))));
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
        } finally {
          await handle.close();
        }
      },
      async free() {
        await fsp.rm(filler, { force: true });
      },
      async dispose() {
        execFileSync('umount', ['-l', dir], { stdio: 'ignore' });
        await fsp.rm(dir, { recursive: true, force: true });
      },
    };
  }
  const flag = path.join(parent, `disk-full-${stage}.flag`);
  const variable = `KAFKA_LANCE_TEST_DISK_FULL_${stage.toUpperCase()}`;
  // In this process (and the worker threads it starts from now on) through its faults;
  // in a child process through the variable its start parses.
  const previous = threadFaults();
  shareFaults({ ...previous, diskFullFlags: { ...previous.diskFullFlags, [stage]: flag } });
  let full = false;
  return {
    method: 'injection',
    dir,
    env: { [variable]: flag },
    available: () => Promise.resolve(full ? 0 : Number.POSITIVE_INFINITY),
    async fill() {
      await fsp.writeFile(flag, 'full');
      full = true;
    },
    async free() {
      await fsp.rm(flag, { force: true });
      full = false;
    },
    async dispose() {
      await fsp.rm(flag, { force: true });
      shareFaults(previous);
      await fsp.rm(dir, { recursive: true, force: true });
    },
  };
}
