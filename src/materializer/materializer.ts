import { ulid } from 'ulid';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { BoundedBudget } from '../common/bounded-budget';
import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import type { TopicPartitionKey } from '../common/offsets';
import {
  commitSafetyOf,
  commitsBesidePublications,
  publicationsInFlight,
  type CommitSafety,
} from '../lance/commit-rule';
import type { SharedConnections } from '../lance/connect';
import { LanceTable, type LanceTarget } from '../lance/lance-table';
import { RESTORE_INTENT_FILE } from '../lance/restore-intent';
import { FileLocks } from '../staging/file-locks';
import { QUARANTINE_DIR } from '../staging/quarantine';
import { SealedPartCatalog } from '../staging/sealed-catalog';
import { readSealedPart, type SealedPart } from '../staging/sealed-part';
import { compact, maintainsTable } from './compaction';
import { crashPoint } from '../faults/crash-points';
import { FailurePolicy, classifyFailure } from './failure';
import { countKeptRows } from './keep-range';
import { PublicationCounters, type MaterializerStats } from './materializer-stats';
import { Permits } from './permits';
import { ledger, type LedgerEntry, type Plan, type QuarantineRecord } from './ledger';
import {
  type CommitAfter,
  keptRowsWithoutReading,
  planPublications,
  toPlanPart,
  type PartDecision,
  withAgedEpochs,
} from './planner';
import type { PartitionOwnership } from '../ownership/partition-ownership';
import type { PreparationContext } from './preparation';
import { PartialPublicationError } from './publication-errors';
import { Publisher, type PreparationMode, type PublicationResult } from './publisher';
import { quarantineFailed, type QuarantineContext } from './quarantine-failed';
import { publicationLayout } from './publication-file';
import { SourceBuffers } from './source-buffers';

export interface MaterializerOptions {
  readonly tableDir: string;
  readonly lance: LanceTarget;
  /** This process's owner id (its running epochs' ceilings still move). */
  readonly owner: string;
  readonly mode: PreparationMode;
  readonly maxPublicationBytes: number;
  readonly maxPublicationDelayMs: number;
  readonly fetchPermits: number;
  readonly decodePermits: number;
  readonly sourceReservationBytes: number;
  readonly logger: Logger;
  readonly hooks?: PreparationContext['hooks'];
  /** JSON-lines file for the rows of a publication set aside (default: in the table's quarantine directory). */
  readonly deadLetterFile?: string;
  /** Permanent failures (schema, unreadable part) of one plan before it is set aside (default 3). */
  readonly maxPermanentFailures?: number;
  /** Compactions remove versions that stopped being the latest this long ago (0 or absent: keep every version). */
  readonly cleanupOlderThanMs?: number;
  /** False on a store without atomic commits (a declared single writer's): no background index builds. */
  readonly storeAtomic?: boolean;
  /**
   * 'published' (offsets.commitAfter): this replica's running epochs publish before
   * their offsets are committed, so every publication is an insert-if-absent (default 'staged').
   */
  readonly commitAfter?: CommitAfter;
  /** Upsert mode: the key's columns; every publication is then an upsert merge (docs/design/upserts.md). */
  readonly upsertKey?: readonly string[] | undefined;
  /**
   * Upsert mode: whether a value may be Debezium's TOAST placeholder, kept from the stored
   * row (a `debezium` envelope; default true). Elsewhere a value that spells one is a value.
   */
  readonly toastPlaceholders?: boolean;
  /**
   * Called after each publication, inside a run: one run drains a whole backlog (many
   * publications), and counters reported only when it ends sat still for tens of
   * seconds on a dashboard while rows landed (seen in the backlog bench).
   */
  readonly onPublished?: (result: PublicationResult) => void;
  /**
   * The worker's budgets, shared by every table it serves (table-set.ts); absent, this
   * materializer makes its own from fetchPermits, decodePermits and sourceReservationBytes.
   */
  readonly shared?: SharedBudgets;
  /** The worker's Lance connections, one per database for all its tables; absent: this table's own. */
  readonly connections?: SharedConnections;
}

/**
 * Fetch and decode permits, the source reservation and the publications' source buffers:
 * one set per worker, whatever the number of tables.
 */
export interface SharedBudgets {
  readonly fetch: Permits;
  readonly decode: Permits;
  readonly reservation: BoundedBudget;
  readonly buffers: SourceBuffers;
}

export function sharedBudgets(o: {
  readonly fetchPermits: number;
  readonly decodePermits: number;
  readonly sourceReservationBytes: number;
  /** The usual publication's bytes (default: the largest the reservation admits). */
  readonly maxPublicationBytes?: number;
}): SharedBudgets {
  const usualBytes = o.maxPublicationBytes ?? Math.floor(o.sourceReservationBytes / 2);
  // Free buffers kept: as many as the usual publications the reservation admits at once
  // (each holds 2× its bytes), so that idle tables hold none of their own. A buffer also
  // holds the file's head, the parts' alignment and the footer's room, rounded to a MiB.
  const atOnce = Math.max(1, Math.floor(o.sourceReservationBytes / Math.max(1, 2 * usualBytes)));
  return {
    fetch: new Permits('fetch', o.fetchPermits),
    decode: new Permits('decode', o.decodePermits),
    reservation: new BoundedBudget(Number.MAX_SAFE_INTEGER, o.sourceReservationBytes),
    buffers: new SourceBuffers(atOnce, publicationLayout([usualBytes]).capacity + 2 * MIB),
  };
}

const MIB = 1024 * 1024;

/**
 * Turns sealed staging parts into Lance publications: plan (ceiling rule, size and
 * delay bounds), then publish each plan in one Lance commit. Buffered mode runs one
 * publication at a time; streamed mode lets the next publication prepare while one
 * writes, within the shared permits and source reservation. A failed plan never holds
 * the others back: it waits for its retry (FailurePolicy) while they go on, and one
 * that fails permanently is set aside (quarantine + dead letters), never dropped.
 */
export class Materializer {
  readonly #o: MaterializerOptions;
  readonly #lance: LanceTable;
  readonly #publisher: Publisher;
  readonly #catalog: SealedPartCatalog;
  readonly #fetch: Permits;
  readonly #decode: Permits;
  readonly #reservation: BoundedBudget;
  #inPlan = new Set<string>();
  readonly #failures: FailurePolicy;
  readonly #quarantineContext: QuarantineContext;
  readonly #commitSafety: CommitSafety;
  #ownership: ReadonlyMap<TopicPartitionKey, PartitionOwnership> = new Map();
  readonly #counters = new PublicationCounters();
  /** What the last plan left: parts not ready yet, and parts the ownership chain no longer reaches. */
  #waitingParts = 0;
  #unresolvableParts = 0;

  private constructor(o: MaterializerOptions, lance: LanceTable) {
    this.#o = o;
    this.#lance = lance;
    this.#failures = new FailurePolicy(o.maxPermanentFailures ?? 3);
    this.#commitSafety = commitSafetyOf(o.storeAtomic !== false);
    const shared = o.shared ?? sharedBudgets(o);
    this.#fetch = shared.fetch;
    this.#decode = shared.decode;
    this.#reservation = shared.reservation;
    this.#publisher = new Publisher({
      tableDir: o.tableDir,
      lance,
      reservation: this.#reservation,
      buffers: shared.buffers,
      logger: o.logger,
      write: o.upsertKey ? 'upsert' : o.commitAfter === 'published' ? 'insert-if-absent' : 'append',
      preparation: {
        fetch: this.#fetch,
        decode: this.#decode,
        hooks: o.hooks,
      },
    });
    this.#catalog = new SealedPartCatalog(o.tableDir, new FileLocks(), 'materializer', o.logger);
    this.#quarantineContext = {
      tableDir: o.tableDir,
      deadLetterFile: o.deadLetterFile ?? path.join(o.tableDir, QUARANTINE_DIR, 'dead-letters.jsonl'),
      catalog: this.#catalog,
      failures: this.#failures,
      counters: this.#counters,
      logger: o.logger,
    };
  }

  static async open(o: MaterializerOptions): Promise<Materializer> {
    const lance = await LanceTable.connect(o.lance, o.logger, {
      restoreIntent: path.join(o.tableDir, RESTORE_INTENT_FILE),
      upsertKey: o.upsertKey,
      ...(o.toastPlaceholders !== undefined ? { toastPlaceholders: o.toastPlaceholders } : {}),
      ...(o.connections ? { connections: o.connections } : {}),
    });
    return new Materializer(o, lance);
  }

  get lance(): LanceTable {
    return this.#lance;
  }

  /** The broker's view of every partition (chain + committed), refreshed by the caller. */
  setOwnership(ownership: ReadonlyMap<TopicPartitionKey, PartitionOwnership>): void {
    // Kept as given, not copied: every table of a worker gets the same snapshot, which no one changes after.
    this.#ownership = ownership;
  }

  /** Parts sealed by this replica's staging (their writers hashed and ranged them): no read back. */
  sealed(parts: readonly SealedPart[]): void {
    for (const part of parts) this.#catalog.remember(part);
  }

  /** Finishes what a crash or a failure left in the ledger. Runs before any new plan. */
  async resume(now = Date.now(), drain?: Drain, turn?: Turn): Promise<PublicationResult[]> {
    const results: PublicationResult[] = [];
    this.#inPlan = await this.#runLedger(now, results, drain, turn);
    return results;
  }

  /**
   * Plans what is ready and publishes it; returns the publications made. A `turn` bounds
   * the publications attempted (the table set's share of a round): plans beyond it stay
   * in the ledger for the next run, so other tables are served in between.
   */
  async runOnce(now = Date.now(), drain?: Drain, turn?: Turn): Promise<PublicationResult[]> {
    // Plans left by a failure (or a crash) go first, the same way recovery does it; the
    // parts of those still waiting for a retry stay out of new plans.
    const results = await this.resume(now, drain, turn);
    const { parts, quarantined } = await this.#catalog.refresh();
    if (quarantined.length > 0) this.#counters.quarantined('part-corrupt', quarantined.length);
    const out = planPublications({
      parts,
      ownership: this.#ownership,
      liveOwner: this.#o.owner,
      commitAfter: this.#o.commitAfter ?? 'staged',
      planned: this.#inPlan,
      maxPublicationBytes: this.#o.maxPublicationBytes,
      // A drain publishes a small group now: nothing more will join it in this process.
      maxPublicationDelayMs: drain ? 0 : this.#o.maxPublicationDelayMs,
      now,
    });
    // A turn plans no more than it may publish: the rest stays unplanned (ready again at the
    // next run), so that a backlog's plan writes never hold the other tables' turns.
    const groups = turn ? out.groups.slice(0, Math.max(0, turn.attempts)) : out.groups;
    const deferred = out.groups.slice(groups.length).reduce((n, g) => n + g.length, 0);
    this.#waitingParts = out.waiting + deferred;
    if (out.unresolvable.length > 0 && out.unresolvable.length !== this.#unresolvableParts) {
      this.#o.logger.error(
        { event: 'publication.unresolvable', parts: out.unresolvable },
        'the ownership chain no longer reaches these parts\u2019 epochs: they are held, not guessed at',
      );
    }
    this.#unresolvableParts = out.unresolvable.length;
    const plans: Plan[] = [];
    for (const group of groups) plans.push(await this.#writePlan(group));
    // Two publications overlap only where Lance reconciles concurrent commits (commit-rule.ts).
    const inFlight = publicationsInFlight(this.#commitSafety, this.#o.mode === 'streamed');
    for (let i = 0; i < plans.length; i += inFlight) {
      // A drain starts nothing after its deadline; a plan not started stays in the ledger
      // and is published by the next start on this data directory.
      if (drain && Date.now() >= drain.until) break;
      if (turn && turn.attempts <= 0) break;
      const batch = plans.slice(i, i + Math.min(inFlight, turn?.attempts ?? inFlight));
      if (turn) turn.attempts -= batch.length;
      const settled = await Promise.all(
        batch.map((p) => this.#attempt(p, () => this.#publisher.publish(p, this.#o.mode), now)),
      );
      for (const r of settled) if (r.result) results.push(r.result);
    }
    return results;
  }

  /** Compaction by one replica at a time, the one that keeps the table (compaction.ts). */
  async optimizeIfLeader(): Promise<boolean> {
    // Compaction runs in this loop, between publications: with a declared single writer
    // on a store without atomic commits it never races one of ours (commit-rule.ts).
    if (!this.maintainsTable()) return false;
    return compact(this.#lance, this.#o.cleanupOlderThanMs ?? 0, this.#o.logger);
  }

  /** Whether this replica keeps the table: compaction and declared indexes (compaction.ts). */
  maintainsTable(): boolean {
    return maintainsTable(this.#ownership, this.#o.owner);
  }

  /**
   * Whether declared indexes may be built on their own connection beside the
   * publications: not on a declared single writer's non-atomic store, where an index
   * commit could overwrite one of theirs (commit-rule.ts).
   */
  commitsBesidePublications(): boolean {
    return commitsBesidePublications(this.#commitSafety);
  }

  /** What the last run left: parts not ready, parts held, plans waiting for a retry (nothing drained). */
  get left(): {
    readonly waitingParts: number;
    readonly unresolvableParts: number;
    readonly retryingPlans: number;
  } {
    return {
      waitingParts: this.#waitingParts,
      unresolvableParts: this.#unresolvableParts,
      retryingPlans: this.#failures.retrying,
    };
  }

  /** Sealed parts still in the staging directory (a graceful stop reports what it leaves). */
  async partsOnDisk(): Promise<number> {
    const names = await fsp.readdir(this.#o.tableDir).catch(() => [] as string[]);
    return names.filter((n) => n.endsWith('.arrows')).length;
  }

  /** A snapshot; it drains what it reports as recent (publications, permit waits, counts' growth). */
  stats(): MaterializerStats {
    return {
      ...this.#counters.report(),
      recentPermitWaits: [this.#fetch, this.#decode].map((p) => ({ kind: p.kind, seconds: p.drainWaits() })),
      waitingParts: this.#waitingParts,
      unresolvableParts: this.#unresolvableParts,
      retryingPlans: this.#failures.retrying,
      permits: [this.#fetch, this.#decode].map((p) => ({
        kind: p.kind,
        inUse: p.inUse,
        capacity: p.capacity,
        waitSecondsTotal: p.waitSecondsTotal,
        waits: p.waits,
      })),
      reservation: {
        bytes: this.#reservation.bytes,
        limit: this.#o.sourceReservationBytes,
        waitSecondsTotal: this.#reservation.waitSecondsTotal,
      },
    };
  }

  close(): void {
    this.#lance.close();
  }

  async #writePlan(group: readonly PartDecision[]): Promise<Plan> {
    const parts = [];
    for (const d of group) {
      // Only a part cut in the middle of a range needs reading to count what it keeps.
      let kept = keptRowsWithoutReading(d);
      if (d.straddles) kept = await countKept(d);
      parts.push(toPlanPart(d, kept));
      this.#inPlan.add(d.part.path);
    }
    const plan: Plan = {
      id: ulid(),
      table: this.#o.lance.table,
      schemaKey: group[0]!.part.schemaKey,
      createdAt: Date.now(),
      parts,
      rows: parts.reduce((n, p) => n + p.keptRows, 0),
      bytes: parts.reduce((n, p) => n + p.bytes, 0),
      ...(group[0]!.write === 'insert-if-absent' ? { write: 'insert-if-absent' as const } : {}),
    };
    await ledger.writePlan(this.#o.tableDir, plan);
    crashPoint('after-plan');
    return plan;
  }

  /** Every ledger entry once, in creation order; returns the parts of plans still pending. */
  async #runLedger(
    now: number,
    results: PublicationResult[],
    drain?: Drain,
    turn?: Turn,
  ): Promise<Set<string>> {
    const held = new Set<string>();
    for (const entry of await ledger.list(this.#o.tableDir)) {
      const { plan } = entry;
      if (!plan) {
        await this.#publisher.resumeOne(entry, this.#o.mode); // only leftover ledger files
        continue;
      }
      let pending = true;
      const late =
        (drain !== undefined && Date.now() >= drain.until) || (turn !== undefined && turn.attempts <= 0);
      if (!late && !this.#failures.waiting(plan.id, now)) {
        if (turn) turn.attempts -= 1;
        const outcome = entry.quarantined
          ? { pending: !(await quarantineFailed(this.#quarantineContext, plan, entry.quarantined, now)) }
          : await this.#attempt(
              plan,
              () => this.#resume(withAgedEpochs(entry, this.#ownership, this.#o.owner)),
              now,
            );
        pending = outcome.pending;
        if ('result' in outcome && outcome.result) results.push(outcome.result);
      }
      if (pending) for (const p of plan.parts) held.add(p.path);
    }
    return held;
  }

  async #resume(entry: LedgerEntry): Promise<PublicationResult | 'finished'> {
    const outcome = await this.#publisher.resumeOne(entry, this.#o.mode);
    if (outcome !== 'finished') {
      this.#o.logger.info(
        { event: 'publication.recovery', id: outcome.id },
        'an interrupted publication was published',
      );
    }
    return outcome;
  }

  /**
   * Runs one plan to its end. A failure is this plan's alone: it is counted, logged and
   * retried later (or set aside), and never thrown, except a publication found half in
   * the table, which is not ours to repair.
   */
  async #attempt(
    plan: Plan,
    run: () => Promise<PublicationResult | 'finished'>,
    now: number,
  ): Promise<{ result?: PublicationResult; pending: boolean }> {
    try {
      const result = await run();
      this.#failures.done(plan.id);
      this.#counters.succeeded();
      for (const p of plan.parts) this.#catalog.forget(p.path);
      if (result === 'finished') return { pending: false };
      this.#counters.published(result);
      this.#o.logger.info(
        { event: 'publication', table: plan.table, parts: plan.parts.length, ...result },
        'published into Lance',
      );
      this.#o.onPublished?.(result);
      return { result, pending: false };
    } catch (error) {
      if (error instanceof PartialPublicationError) throw error;
      const failure = classifyFailure(error);
      this.#counters.failed(failure.reason, error);
      const verdict = this.#failures.failed(plan.id, failure, now);
      const facts = {
        id: plan.id,
        ...failure.context,
        table: plan.table,
        reason: failure.reason,
        permanent: failure.permanent,
        attempts: verdict.attempts,
        err: errorMessage(error),
      };
      if (verdict.action === 'retry') {
        this.#o.logger[failure.permanent ? 'error' : 'warn'](
          { event: 'publication.failed', ...facts, retryInMs: verdict.retryInMs },
          `publication failed (${failure.reason}); it will be retried, the other publications go on`,
        );
        return { pending: true };
      }
      const record: QuarantineRecord = {
        id: plan.id,
        reason: failure.reason,
        message: errorMessage(error),
        context: failure.context,
        attempts: verdict.attempts,
        at: Date.now(),
      };
      return { pending: !(await quarantineFailed(this.#quarantineContext, plan, record, now)) };
    }
  }
}

/** A graceful stop's last runs: publish what is ready at once, start nothing after `until` (epoch ms). */
export interface Drain {
  readonly until: number;
}

/** One table's share of a round: publication attempts left (counted down by the run). */
export interface Turn {
  attempts: number;
}

async function countKept(d: PartDecision): Promise<number> {
  const { batches } = await readSealedPart(d.part.path);
  return countKeptRows(batches, d.keep);
}
