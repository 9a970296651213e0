import { ulid } from 'ulid';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { BoundedBudget } from '../common/bounded-budget';
import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import { tpKey, type TopicPartitionKey } from '../common/offsets';
import { nearChainEnd } from '../ownership/publishable-range';
import { LanceTable, type LanceTarget } from '../lance/lance-table';
import { FileLocks } from '../staging/file-locks';
import { pathExists } from '../common/fs-durable';
import { QUARANTINE_DIR, quarantinePart } from '../staging/quarantine';
import { SealedPartCatalog } from '../staging/sealed-catalog';
import { readSealedPart, type SealedPart } from '../staging/sealed-part';
import { crashPoint } from './crash-points';
import type { DiskStage } from '../common/errors';
import {
  FailurePolicy,
  SCHEMA_REASONS,
  classifyFailure,
  findDiskFull,
  type PublicationFailureReason,
} from './failure';
import { countKeptRows } from './keep-range';
import { Permits } from './permits';
import { ledger, type LedgerEntry, type Plan, type QuarantineRecord } from './plan';
import {
  type CommitAfter,
  keptRowsWithoutReading,
  planPublications,
  toPlanPart,
  type PartDecision,
} from './planner';
import type { PartitionOwnership } from '../ownership/partition-ownership';
import type { PreparationContext } from './preparation';
import {
  PartialPublicationError,
  Publisher,
  type PreparationMode,
  type PublicationResult,
} from './publisher';
import { quarantinePlan } from './quarantine-plan';

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
  /**
   * Called after each publication, inside a run: one run drains a whole backlog (many
   * publications), and counters reported only when it ends sat still for tens of
   * seconds on a dashboard while rows landed (seen in the backlog bench).
   */
  readonly onPublished?: (result: PublicationResult) => void;
}

/** Where a publication met a full disk: the Lance table, or the staging directory (ledger, plans). */
export interface DiskFullState {
  readonly stage: DiskStage;
  readonly path: string;
  readonly operation: string;
}

function diskFullState(error: unknown): DiskFullState {
  const typed = findDiskFull(error);
  if (typed) return { stage: typed.stage, path: typed.path, operation: typed.operation };
  // A bare errno error: the materializer writes nothing but the ledger outside Lance.
  const e = error as { path?: unknown; syscall?: unknown };
  const text = (v: unknown, otherwise: string) => (typeof v === 'string' ? v : otherwise);
  return { stage: 'staging', path: text(e.path, ''), operation: text(e.syscall, 'write') };
}

export interface MaterializerStats {
  readonly publications: number;
  readonly failedPublications: number;
  readonly publishedRows: number;
  readonly publishedBytes: number;
  readonly waitingParts: number;
  readonly unresolvableParts: number;
  /** Failed publication attempts by reason (failedPublications is their sum). */
  readonly failures: Readonly<Partial<Record<PublicationFailureReason, number>>>;
  /** Parts moved to the staging quarantine, by reason. */
  readonly quarantinedParts: Readonly<Partial<Record<PublicationFailureReason, number>>>;
  /** Rows of set-aside publications written to the dead-letter file, by topic. */
  readonly deadLetteredRows: Readonly<Record<string, number>>;
  /** Plans in the ledger waiting for a retry after a failure. */
  readonly retryingPlans: number;
  /** Set while the last publication attempt met a full disk (cleared by the next success). */
  readonly diskFull?: DiskFullState;
  readonly permits: {
    kind: 'fetch' | 'decode';
    inUse: number;
    capacity: number;
    waitSecondsTotal: number;
    waits: number;
  }[];
  readonly reservation: { bytes: number; limit: number; waitSecondsTotal: number };
  readonly last: PublicationResult | undefined;
  /** Publications and permit waits since the previous stats() call (drained by it). */
  readonly recent: readonly PublicationResult[];
  readonly recentPermitWaits: readonly { kind: 'fetch' | 'decode'; seconds: readonly number[] }[];
}

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
  readonly #deadLetterFile: string;
  #ownership = new Map<TopicPartitionKey, PartitionOwnership>();
  #stats = {
    publications: 0,
    failedPublications: 0,
    publishedRows: 0,
    publishedBytes: 0,
    waitingParts: 0,
    unresolvableParts: 0,
  };
  #failureCounts: Partial<Record<PublicationFailureReason, number>> = {};
  #diskFull: DiskFullState | undefined;
  #quarantinedParts: Partial<Record<PublicationFailureReason, number>> = {};
  #deadLetteredRows: Record<string, number> = {};
  #last: PublicationResult | undefined;
  #recent: PublicationResult[] = [];

  private constructor(o: MaterializerOptions, lance: LanceTable) {
    this.#o = o;
    this.#lance = lance;
    this.#failures = new FailurePolicy(o.maxPermanentFailures ?? 3);
    this.#deadLetterFile = o.deadLetterFile ?? path.join(o.tableDir, QUARANTINE_DIR, 'dead-letters.jsonl');
    this.#fetch = new Permits('fetch', o.fetchPermits);
    this.#decode = new Permits('decode', o.decodePermits);
    this.#reservation = new BoundedBudget(Number.MAX_SAFE_INTEGER, o.sourceReservationBytes);
    this.#publisher = new Publisher({
      tableDir: o.tableDir,
      lance,
      reservation: this.#reservation,
      logger: o.logger,
      write: o.commitAfter === 'published' ? 'insert-if-absent' : 'append',
      preparation: {
        fetch: this.#fetch,
        decode: this.#decode,
        hooks: o.hooks,
      },
    });
    this.#catalog = new SealedPartCatalog(o.tableDir, new FileLocks(), 'materializer', o.logger);
  }

  static async open(o: MaterializerOptions): Promise<Materializer> {
    return new Materializer(o, await LanceTable.connect(o.lance, o.logger));
  }

  get lance(): LanceTable {
    return this.#lance;
  }

  /** The broker's view of every partition (chain + committed), refreshed by the caller. */
  setOwnership(ownership: ReadonlyMap<TopicPartitionKey, PartitionOwnership>): void {
    this.#ownership = new Map(ownership);
  }

  /** Parts sealed by this replica's staging (their writers hashed and ranged them): no read back. */
  sealed(parts: readonly SealedPart[]): void {
    for (const part of parts) this.#catalog.remember(part);
  }

  /** Finishes what a crash or a failure left in the ledger. Runs before any new plan. */
  async resume(now = Date.now(), drain?: Drain): Promise<PublicationResult[]> {
    const results: PublicationResult[] = [];
    this.#inPlan = await this.#runLedger(now, results, drain);
    return results;
  }

  /** Plans what is ready and publishes it; returns the publications made. */
  async runOnce(now = Date.now(), drain?: Drain): Promise<PublicationResult[]> {
    // Plans left by a failure (or a crash) go first, the same way recovery does it; the
    // parts of those still waiting for a retry stay out of new plans.
    const results = await this.resume(now, drain);
    const { parts, quarantined } = await this.#catalog.refresh();
    if (quarantined.length > 0) this.#bump(this.#quarantinedParts, 'part-corrupt', quarantined.length);
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
    this.#stats.waitingParts = out.waiting;
    if (out.unresolvable.length > 0 && out.unresolvable.length !== this.#stats.unresolvableParts) {
      this.#o.logger.error(
        { event: 'publication.unresolvable', parts: out.unresolvable },
        'the ownership chain no longer reaches these parts\u2019 epochs: they are held, not guessed at',
      );
    }
    this.#stats.unresolvableParts = out.unresolvable.length;
    const plans: Plan[] = [];
    for (const group of out.groups) plans.push(await this.#writePlan(group));
    // Two publications overlap only where Lance reconciles concurrent commits: on a
    // declared single writer's non-atomic store, one publication's schema commit
    // (addColumns) could overwrite the other's add.
    const inFlight = this.#o.mode === 'streamed' && this.storeCommitsAtomically() ? 2 : 1;
    for (let i = 0; i < plans.length; i += inFlight) {
      // A drain starts nothing after its deadline; a plan not started stays in the ledger
      // and is published by the next start on this data directory.
      if (drain && Date.now() >= drain.until) break;
      const batch = plans.slice(i, i + inFlight);
      const settled = await Promise.all(
        batch.map((p) => this.#attempt(p, () => this.#publisher.publish(p, this.#o.mode), now)),
      );
      for (const r of settled) if (r.result) results.push(r.result);
    }
    return results;
  }

  /**
   * Compaction by one replica at a time: the owner of the first partition of the
   * first topic (by the chains it was given). A commit conflict with a concurrent
   * append is retried inside; any other failure is logged, never fatal. Versions that
   * stopped being the latest `cleanupOlderThanMs` ago are removed with it, only below a
   * cleanup fence committed first (an insert-if-absent merge in flight from before meets
   * it at its commit): two compactors for a moment (ownership moving) are harmless, each
   * keeps what the other's in-flight commits may still need (LanceTable.optimize).
   */
  async optimizeIfLeader(): Promise<boolean> {
    // Compaction runs in this loop, between publications: with a declared single writer
    // on a store without atomic commits it never races one of ours.
    if (!this.maintainsTable()) return false;
    try {
      const t0 = performance.now();
      const outcome = await this.#lance.optimize(this.#o.cleanupOlderThanMs ?? 0);
      if (!outcome) return false;
      this.#o.logger.info(
        {
          event: 'lance.optimized',
          seconds: (performance.now() - t0) / 1000,
          fragmentsRemoved: outcome.fragmentsRemoved,
          fragmentsAdded: outcome.fragmentsAdded,
          versionsRemoved: outcome.versionsRemoved,
          bytesRemoved: outcome.bytesRemoved,
          ...(outcome.cutoff ? { versionsBefore: outcome.cutoff.toISOString() } : {}),
        },
        'compacted the table',
      );
      return true;
    } catch (error) {
      this.#o.logger.warn(
        { event: 'lance.optimize.failed', err: error },
        'compaction failed; will try again',
      );
      return false;
    }
  }

  /**
   * Whether this replica keeps the table (compaction, declared indexes): the owner of the
   * first partition of the first topic, by the chains it was given. Ownership moving can
   * make two replicas believe it for a moment; both kinds of maintenance tolerate that.
   */
  maintainsTable(): boolean {
    const first = [...this.#ownership.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))[0];
    return first !== undefined && first[1].chain.at(-1)?.owner === this.#o.owner;
  }

  /**
   * A local directory, or a store whose commits are atomic (put-if-absent, s3+ddb://).
   * Not a declared single writer's non-atomic store: declared indexes are built on their
   * own connection beside publications, and there an index commit could overwrite one.
   */
  storeCommitsAtomically(): boolean {
    return this.#o.storeAtomic !== false;
  }

  /** What the last run left: parts not ready, parts held, plans waiting for a retry (nothing drained). */
  get left(): {
    readonly waitingParts: number;
    readonly unresolvableParts: number;
    readonly retryingPlans: number;
  } {
    return {
      waitingParts: this.#stats.waitingParts,
      unresolvableParts: this.#stats.unresolvableParts,
      retryingPlans: this.#failures.retrying,
    };
  }

  /** Sealed parts still in the staging directory (a graceful stop reports what it leaves). */
  async partsOnDisk(): Promise<number> {
    const names = await fsp.readdir(this.#o.tableDir).catch(() => [] as string[]);
    return names.filter((n) => n.endsWith('.arrows')).length;
  }

  /** A snapshot; it drains the recent publications and permit waits it reports. */
  stats(): MaterializerStats {
    const recent = this.#recent;
    this.#recent = [];
    return {
      recent,
      recentPermitWaits: [this.#fetch, this.#decode].map((p) => ({ kind: p.kind, seconds: p.drainWaits() })),
      ...this.#stats,
      failures: { ...this.#failureCounts },
      ...(this.#diskFull ? { diskFull: this.#diskFull } : {}),
      quarantinedParts: { ...this.#quarantinedParts },
      deadLetteredRows: { ...this.#deadLetteredRows },
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
      last: this.#last,
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
  async #runLedger(now: number, results: PublicationResult[], drain?: Drain): Promise<Set<string>> {
    const held = new Set<string>();
    for (const entry of await ledger.list(this.#o.tableDir)) {
      const { plan } = entry;
      if (!plan) {
        await this.#publisher.resumeOne(entry, this.#o.mode); // only leftover ledger files
        continue;
      }
      let pending = true;
      const late = drain !== undefined && Date.now() >= drain.until;
      if (!late && !this.#failures.waiting(plan.id, now)) {
        const outcome = entry.quarantined
          ? { pending: !(await this.#setAside(plan, entry.quarantined, now)) }
          : await this.#attempt(plan, () => this.#resume(this.#withAgedEpochs(entry)), now);
        pending = outcome.pending;
        if ('result' in outcome && outcome.result) results.push(outcome.result);
      }
      if (pending) for (const p of plan.parts) held.add(p.path);
    }
    return held;
  }

  /**
   * A plan written as an append whose epochs have since dropped out of a full chain, or
   * come close (a replica back after many rebalances with plans in its ledger): published
   * insert-if-absent, since a dropped epoch's plan of another replica may hold a redundant
   * copy of its rows (DESIGN.md, "Scale-down and old epochs"). Decided anew at every
   * attempt from the current snapshot; the plan file is not rewritten.
   */
  #withAgedEpochs(entry: LedgerEntry): LedgerEntry {
    const { plan } = entry;
    if (!plan || plan.write === 'insert-if-absent') return entry;
    const aged = plan.parts.some((part) =>
      part.ranges.some((r) => {
        const ownership = this.#ownership.get(tpKey(r.topic, r.partition));
        return (
          ownership !== undefined &&
          nearChainEnd(ownership.chain, part.epoch.owner, part.epoch.epoch, this.#o.owner)
        );
      }),
    );
    return aged ? { ...entry, plan: { ...plan, write: 'insert-if-absent' } } : entry;
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
      this.#diskFull = undefined;
      for (const p of plan.parts) this.#catalog.forget(p.path);
      if (result === 'finished') return { pending: false };
      this.#stats.publications += 1;
      this.#stats.publishedRows += result.rows;
      this.#stats.publishedBytes += result.bytes;
      this.#last = result;
      if (this.#recent.length < 10_000) this.#recent.push(result);
      this.#o.logger.info(
        { event: 'publication', table: plan.table, parts: plan.parts.length, ...result },
        'published into Lance',
      );
      this.#o.onPublished?.(result);
      return { result, pending: false };
    } catch (error) {
      if (error instanceof PartialPublicationError) throw error;
      const failure = classifyFailure(error);
      this.#stats.failedPublications += 1;
      this.#bump(this.#failureCounts, failure.reason);
      if (failure.reason === 'disk-full') this.#diskFull = diskFullState(error);
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
      return { pending: !(await this.#setAside(plan, record, now)) };
    }
  }

  /** Moves a permanently failed plan out of the way (quarantine-plan.ts); false if that failed (retried later). */
  async #setAside(plan: Plan, record: QuarantineRecord, now: number): Promise<boolean> {
    const deadLetterRows = SCHEMA_REASONS.has(record.reason);
    try {
      if (await this.#setAsideDamagedPart(plan, record)) return true;
      const outcome = await quarantinePlan({
        tableDir: this.#o.tableDir,
        plan,
        record,
        deadLetterFile: this.#deadLetterFile,
        deadLetterRows,
      });
      this.#failures.done(plan.id);
      for (const p of plan.parts) this.#catalog.forget(p.path);
      this.#bump(this.#quarantinedParts, record.reason as PublicationFailureReason, outcome.moved.length);
      let letters = 0;
      for (const [topic, n] of outcome.deadLetters) {
        this.#deadLetteredRows[topic] = (this.#deadLetteredRows[topic] ?? 0) + n;
        letters += n;
      }
      this.#o.logger.error(
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
          deadLetterFile: deadLetterRows ? this.#deadLetterFile : undefined,
        },
        `publication set aside after ${record.attempts} failed attempts (${record.reason}): its parts are in quarantine${deadLetterRows ? ', its rows in the dead-letter file' : ''}; the other publications go on`,
      );
      return true;
    } catch (error) {
      this.#failures.postpone(plan.id, now);
      this.#o.logger.error(
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
  async #setAsideDamagedPart(plan: Plan, record: QuarantineRecord): Promise<boolean> {
    const damaged = record.context.path;
    if (record.reason !== 'part-corrupt' || typeof damaged !== 'string') return false;
    if (plan.parts.length < 2 || !plan.parts.some((p) => p.path === damaged)) return false;
    if (await ledger.isWriting(this.#o.tableDir, plan.id)) return false;
    await ledger.forget(this.#o.tableDir, plan.id);
    if (await pathExists(damaged))
      await quarantinePart(this.#o.tableDir, damaged, record.message, this.#o.logger);
    this.#failures.done(plan.id);
    for (const p of plan.parts) this.#catalog.forget(p.path);
    this.#bump(this.#quarantinedParts, 'part-corrupt', 1);
    this.#o.logger.error(
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

  #bump<K extends string>(counts: Partial<Record<K, number>>, key: K, n = 1): void {
    counts[key] = (counts[key] ?? 0) + n;
  }
}

/** A graceful stop's last runs: publish what is ready at once, start nothing after `until` (epoch ms). */
export interface Drain {
  readonly until: number;
}

async function countKept(d: PartDecision): Promise<number> {
  const { batches } = await readSealedPart(d.part.path);
  return countKeptRows(batches, d.keep);
}
