import { readFileSync } from 'node:fs';

/**
 * What names one process on this host beyond its pid. A pid names a process only
 * while it lives: Linux's pid_max is often 32768, so the pid of a process that died
 * soon belongs to another. The boot and the start time (clock ticks since boot) tell
 * that other process apart. Both are absent where /proc is not (macOS): there the pid
 * alone is all there is.
 */
export interface ProcessIdentity {
  /** /proc/sys/kernel/random/boot_id: changes at every boot. */
  readonly bootId?: string;
  /** /proc/PID/stat field 22: when the process started, in clock ticks since boot. */
  readonly startTicks?: number;
}

/** The identity of a running process, or undefined when it is not running (or is a zombie). */
export function processIdentity(pid: number): ProcessIdentity | undefined {
  if (!pidExists(pid)) return undefined;
  const stat = readProc(`/proc/${pid}/stat`);
  if (stat === undefined) return {};
  // Fields after the command name, which is in parentheses and may hold spaces and ')'.
  const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
  if (fields[0] === 'Z') return undefined; // a zombie: dead, only not reaped
  const startTicks = Number(fields[19]);
  return { bootId: bootId(), startTicks: Number.isSafeInteger(startTicks) ? startTicks : undefined };
}

/**
 * True when `recorded` (the identity of a process some time ago) and `now` (the identity
 * of the process with its pid now) can be the same process. Fields either side lacks are
 * not compared: an identity written before they were kept matches on the pid alone.
 */
export function sameProcess(recorded: ProcessIdentity, now: ProcessIdentity): boolean {
  if (recorded.bootId !== undefined && now.bootId !== undefined && recorded.bootId !== now.bootId) {
    return false;
  }
  if (recorded.startTicks !== undefined && now.startTicks !== undefined) {
    return recorded.startTicks === now.startTicks;
  }
  return true;
}

function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function bootId(): string | undefined {
  return readProc('/proc/sys/kernel/random/boot_id')?.trim();
}

function readProc(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}
