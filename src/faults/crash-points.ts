import { writeSync } from 'node:fs';
import type { CrashPointName } from './faults';
import { threadFaults } from './thread-faults';

export type { CrashPointName } from './faults';

/**
 * Test-only crash points (Faults.crashAt, KAFKA_LANCE_TEST_CRASH_AT=<name>): the
 * process SIGKILLs itself there, so tests can prove that every point ends exactly
 * once after a restart. Without that fault: a no-op.
 */

let stopped = false;

/**
 * Also test-only: Faults.stopAt (KAFKA_LANCE_TEST_STOP_AT=<name>) makes the process
 * SIGSTOP itself the first time it reaches that point (a zombie frozen inside a
 * publication, deterministic where an outside SIGSTOP is a matter of timing), after
 * writing one `{"event":"test.stopped-at"}` line to stdout; the test SIGCONTs it.
 */
export function crashPoint(name: CrashPointName): void {
  const faults = threadFaults();
  if (faults.crashAt === name) process.kill(process.pid, 'SIGKILL');
  if (faults.stopAt === name && !stopped) {
    stopped = true;
    writeSync(1, `${JSON.stringify({ level: 30, event: 'test.stopped-at', point: name })}\n`);
    process.kill(process.pid, 'SIGSTOP');
  }
}

/**
 * Arms `name` to fire `ms` after now (a native call in flight, such as an index build,
 * has no JavaScript point inside it). Returns the disarm for when the call ends first.
 */
export function crashPointAfter(name: CrashPointName, ms: number): () => void {
  if (threadFaults().crashAt !== name) return () => undefined;
  const timer = setTimeout(() => crashPoint(name), ms);
  return () => clearTimeout(timer);
}

/**
 * Test-only: Faults.killAtCommit (KAFKA_LANCE_TEST_KILL_AT_COMMIT=<n>) SIGKILLs the
 * process when its nth data commit is answered, before the answer is recorded: the
 * broker holds offsets this replica never learned it committed. `answered` is the
 * committer's own count (1 for its first), so two replicas in one process never share it.
 */
export function commitAnswered(answered: number): void {
  const at = threadFaults().killAtCommit;
  if (at !== undefined && answered >= at) process.kill(process.pid, 'SIGKILL');
}
