import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
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
