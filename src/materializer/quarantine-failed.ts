import type { Logger } from '../common/logger';
import { pathExists } from '../common/fs-durable';
import { errorMessage } from '../common/errors';
import { quarantinePart } from '../staging/quarantine';
import type { SealedPartCatalog } from '../staging/sealed-catalog';
import { SCHEMA_REASONS, type FailurePolicy, type PublicationFailureReason } from './failure';
import type { PublicationCounters } from './materializer-stats';
import { ledger, type Plan, type QuarantineRecord } from './ledger';
import { quarantinePlan } from './quarantine-plan';

/**
 * Quarantining a plan that failed for good ("set aside" in its log): its parts to the staging quarantine and,
 * when the table refused its rows' schema, its rows to the dead-letter file
 * (quarantine-plan.ts); only the damaged part when one part of it is unreadable. Never
 * dropped; the other publications go on.
 */

/** What a quarantine touches besides the plan: the ledger's directory, the catalog, the retry policy, the counts. */
export interface QuarantineContext {
  readonly tableDir: string;
  readonly deadLetterFile: string;
  readonly catalog: SealedPartCatalog;
  readonly failures: FailurePolicy;
  readonly counters: PublicationCounters;
  readonly logger: Logger;
}

/** Moves a permanently failed plan out of the way (quarantine-plan.ts); false if that failed (retried later). */
export async function quarantineFailed(
  ctx: QuarantineContext,
  plan: Plan,
  record: QuarantineRecord,
  now: number,
): Promise<boolean> {
  const deadLetterRows = SCHEMA_REASONS.has(record.reason);
  try {
    if (await quarantineDamagedPart(ctx, plan, record)) return true;
    const outcome = await quarantinePlan({
      tableDir: ctx.tableDir,
      plan,
      record,
      deadLetterFile: ctx.deadLetterFile,
      deadLetterRows,
    });
    ctx.failures.done(plan.id);
    for (const p of plan.parts) ctx.catalog.forget(p.path);
    ctx.counters.quarantined(record.reason as PublicationFailureReason, outcome.moved.length);
    let letters = 0;
    for (const [topic, n] of outcome.deadLetters) {
      ctx.counters.deadLettered(topic, n);
      letters += n;
    }
    ctx.logger.error(
      {
        event: 'publication.quarantined',
        id: plan.id,
        ...record.context,
        table: plan.table,
        reason: record.reason,
        attempts: record.attempts,
        err: record.message,
        rows: plan.rows,
        quarantined: outcome.moved,
        deadLetters: letters,
        deadLetterFile: deadLetterRows ? ctx.deadLetterFile : undefined,
      },
      `publication set aside after ${record.attempts} failed attempts (${record.reason}): its parts are in quarantine${deadLetterRows ? ', its rows in the dead-letter file' : ''}; the other publications go on`,
    );
    return true;
  } catch (error) {
    ctx.failures.postpone(plan.id, now);
    ctx.logger.error(
      { event: 'publication.quarantine.failed', id: plan.id, err: errorMessage(error) },
      'setting a failed publication aside failed; will try again',
    );
    return false;
  }
}

/**
 * A damaged part (its bytes differ from what its writer hashed) fails its whole plan,
 * but only that part is unreadable: the plan is dropped (never written: no `writing`)
 * and only the damaged part goes to quarantine; the plan's other parts are read again
 * by the catalog (trailer checked) and planned anew. The plan goes first: a kill in
 * between leaves the damaged part unplanned, and the catalog's read quarantines it.
 * Before, the whole plan (good parts with it) was set aside, their rows in no table and
 * no dead-letter file.
 */
async function quarantineDamagedPart(
  ctx: QuarantineContext,
  plan: Plan,
  record: QuarantineRecord,
): Promise<boolean> {
  const damaged = record.context.path;
  if (record.reason !== 'part-corrupt' || typeof damaged !== 'string') return false;
  if (plan.parts.length < 2 || !plan.parts.some((p) => p.path === damaged)) return false;
  if (await ledger.isWriting(ctx.tableDir, plan.id)) return false;
  await ledger.forget(ctx.tableDir, plan.id);
  if (await pathExists(damaged)) await quarantinePart(ctx.tableDir, damaged, record.message, ctx.logger);
  ctx.failures.done(plan.id);
  for (const p of plan.parts) ctx.catalog.forget(p.path);
  ctx.counters.quarantined('part-corrupt', 1);
  ctx.logger.error(
    {
      event: 'publication.quarantined',
      id: plan.id,
      table: plan.table,
      reason: record.reason,
      attempts: record.attempts,
      err: record.message,
      quarantined: [damaged],
      replanned: plan.parts.length - 1,
    },
    'a damaged part was set aside; the other parts of its publication are planned again',
  );
  return true;
}
