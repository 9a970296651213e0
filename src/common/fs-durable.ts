import { promises as fsp } from 'node:fs';
import * as path from 'node:path';

/**
 * A rename or create is durable only once its directory is fsynced too (POSIX makes
 * no promise for a directory entry until then). Every place that publishes a file name goes through here.
 */
export async function fsyncDirectory(dir: string): Promise<void> {
  const handle = await fsp.open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * The directory fsync as a seam: the code that creates files takes one, so a test can
 * see that a new name was made durable before the data in it was reported durable (a
 * missing directory sync loses nothing until a power cut, so no other test catches it).
 */
export interface DirectorySync {
  syncDirectory(dir: string): Promise<void>;
}

export const realDirectorySync: DirectorySync = { syncDirectory: fsyncDirectory };

/**
 * `mkdir -p`, then fsync the parent of every directory it created: a new directory's
 * entry is as volatile as a new file's, and a lost table directory loses its parts.
 */
export async function mkdirDurably(dir: string, sync: DirectorySync = realDirectorySync): Promise<void> {
  const first = await fsp.mkdir(dir, { recursive: true });
  if (first === undefined) return;
  const created: string[] = [];
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    created.unshift(d);
    if (d === path.resolve(first) || d === path.dirname(d)) break;
  }
  for (const d of created) await sync.syncDirectory(path.dirname(d));
}

/** Rename, then fsync the destination directory (and the source's, when it differs). */
export async function renameDurably(from: string, to: string): Promise<void> {
  await fsp.rename(from, to);
  await fsyncDirectory(path.dirname(to));
  if (path.dirname(from) !== path.dirname(to)) await fsyncDirectory(path.dirname(from));
}

export async function unlinkDurably(file: string): Promise<void> {
  await fsp.unlink(file);
  await fsyncDirectory(path.dirname(file));
}

/** Write a whole file under a temporary name, fsync it, rename it into place, fsync the directory. */
export async function writeFileAtomically(file: string, data: string | Uint8Array): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}-${Date.now()}`;
  const handle = await fsp.open(tmp, 'wx');
  try {
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await renameDurably(tmp, file);
  } catch (error) {
    // A full disk retried every tick must not leave a temporary file per try.
    await fsp.rm(tmp, { force: true });
    throw error;
  }
}

export async function pathExists(p: string): Promise<boolean> {
  try {
    await fsp.access(p);
    return true;
  } catch {
    return false;
  }
}
