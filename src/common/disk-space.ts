import { existsSync, promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { threadFaults } from '../faults/thread-faults';
import { DiskFullError, type DiskStage } from './errors';

/**
 * Full disks. A full file system is a condition that passes, not a
 * fault of the data: every write that meets it is kept and retried, consumption pauses
 * meanwhile (kafka/ingestion.ts), and nothing is set aside or reported durable.
 */

/** Errno codes of a write that failed only for lack of space or quota. */
const DISK_FULL_CODES: ReadonlySet<string> = new Set(['ENOSPC', 'EDQUOT']);

/** True when `error` (or any error in its `cause` chain) is a full disk or a spent quota. */
export function isDiskFull(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 8; depth++) {
    if (e instanceof DiskFullError) return true;
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && DISK_FULL_CODES.has(code)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** The DiskFullError of a failed write, or undefined when the failure is something else. */
export function diskFullError(
  stage: DiskStage,
  file: string,
  operation: string,
  error: unknown,
): DiskFullError | undefined {
  if (error instanceof DiskFullError) return error;
  return isDiskFull(error) ? new DiskFullError(stage, file, operation, error) : undefined;
}

/** Bytes an unprivileged writer may still use on the file system holding `file` (its nearest existing ancestor). */
export async function freeBytes(file: string): Promise<number | undefined> {
  for (let dir = path.resolve(file); ; dir = path.dirname(dir)) {
    try {
      const s = await fsp.statfs(dir);
      return s.bavail * s.bsize;
    } catch {
      if (dir === path.dirname(dir)) return undefined;
    }
  }
}

/**
 * Test-only fault injection at the file-system layer, for machines where a test cannot
 * mount a small file system of its own (no CAP_SYS_ADMIN): while the file named by
 * Faults.diskFullFlags (KAFKA_LANCE_TEST_DISK_FULL_STAGING or `..._LANCE`) exists, every
 * staging part write (or Lance add) fails with ENOSPC, exactly as a full disk makes it
 * fail. Without that fault (always, outside tests), it costs one property read per write.
 */
export function injectedDiskFull(stage: DiskStage, file: string): NodeJS.ErrnoException | undefined {
  const flag = threadFaults().diskFullFlags[stage];
  if (!flag || !existsSync(flag)) return undefined;
  return Object.assign(new Error(`ENOSPC: no space left on device (injected), write '${file}'`), {
    code: 'ENOSPC',
    errno: -28,
    syscall: 'write',
    path: file,
  });
}
