import { writeSync } from 'node:fs';

/**
 * Test-only crash points (KAFKA_LANCE_TEST_CRASH_AT=<name>): the process SIGKILLs
 * itself there, so tests can prove that every point ends exactly once after a
 * restart. Unset in production: a no-op.
 */
export type CrashPointName =
  | 'after-plan'
  | 'during-prepare'
  | 'before-add'
  | 'after-add'
  /** After an add whose outcome is counted (a rejected add, an insert-if-absent), before the count. */
  | 'before-confirm'
  | 'after-published'
  | 'after-sources-deleted'
  | 'after-plan-forgotten'
  | 'after-writing-forgotten'
  | 'after-quarantine-marked'
  | 'after-dead-letters-written'
  | 'after-first-part-quarantined'
  /** A declared index's build has run for a moment and is not committed (crashPointAfter). */
  | 'during-index-build';

let stopped = false;

/**
 * Also test-only: KAFKA_LANCE_TEST_STOP_AT=<name> makes the process SIGSTOP itself the
 * first time it reaches that point (a zombie frozen inside a publication, deterministic
 * where an outside SIGSTOP is a matter of timing), after writing one
 * `{"event":"test.stopped-at"}` line to stdout; the test SIGCONTs it.
 */
export function crashPoint(name: CrashPointName): void {
  if (process.env.KAFKA_LANCE_TEST_CRASH_AT === name) process.kill(process.pid, 'SIGKILL');
  if (process.env.KAFKA_LANCE_TEST_STOP_AT === name && !stopped) {
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
  if (process.env.KAFKA_LANCE_TEST_CRASH_AT !== name) return () => undefined;
  const timer = setTimeout(() => crashPoint(name), ms);
  return () => clearTimeout(timer);
}
