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
  /** After an add on a store without put-if-absent, before the settled count (issue 10). */
  | 'before-confirm'
  | 'after-published'
  | 'after-sources-deleted'
  | 'after-plan-forgotten'
  | 'after-writing-forgotten'
  | 'after-quarantine-marked'
  | 'after-dead-letters-written'
  | 'after-first-part-quarantined';

export function crashPoint(name: CrashPointName): void {
  if (process.env.KAFKA_LANCE_TEST_CRASH_AT === name) process.kill(process.pid, 'SIGKILL');
}
