import { ulid } from 'ulid';
import { BoundedBudget } from '../common/bounded-budget';
import type { Logger } from '../common/logger';
import type { TopicPartitionKey } from '../common/offsets';
import { LanceTable, type LanceTarget } from '../lance/lance-table';
import { ClaimRegistry } from '../staging/claims';
import { SealedPartCatalog } from '../staging/sealed-catalog';
import { readSealedPart } from '../staging/sealed-part';
import { crashPoint } from './crash-points';
import { countKeptRows } from './keep-range';
import { Permits } from './permits';
import { ledger, type Plan } from './plan';
import {
  keptRowsWithoutReading,
  planPublications,
  toPlanPart,
  type PartDecision,
  type PartitionOwnership,
} from './planner';
import type { PreparationContext } from './preparation';
import { Publisher, type PreparationMode, type PublicationResult } from './publisher';

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
}

export interface MaterializerStats {
  readonly publications: number;
  readonly failedPublications: number;
  readonly publishedRows: number;
  readonly publishedBytes: number;
  readonly waitingParts: number;
  readonly unresolvableParts: number;
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
 * writes, within the shared permits and source reservation.
 */
export class Materializer {
  readonly #o: MaterializerOptions;
  readonly #lance: LanceTable;
  readonly #publisher: Publisher;
  readonly #catalog: SealedPartCatalog;
  readonly #fetch: Permits;
  readonly #decode: Permits;
  readonly #reservation: BoundedBudget;
  readonly #inPlan = new Set<string>();
  #ownership = new Map<TopicPartitionKey, PartitionOwnership>();
  #stats = {
    publications: 0,
    failedPublications: 0,
    publishedRows: 0,
    publishedBytes: 0,
    waitingParts: 0,
    unresolvableParts: 0,
  };
  #last: PublicationResult | undefined;
  #recent: PublicationResult[] = [];

  private constructor(o: MaterializerOptions, lance: LanceTable) {
    this.#o = o;
    this.#lance = lance;
    this.#fetch = new Permits('fetch', o.fetchPermits);
    this.#decode = new Permits('decode', o.decodePermits);
    this.#reservation = new BoundedBudget(Number.MAX_SAFE_INTEGER, o.sourceReservationBytes);
    this.#publisher = new Publisher({
      tableDir: o.tableDir,
      lance,
      reservation: this.#reservation,
      logger: o.logger,
      preparation: {
        fetch: this.#fetch,
        decode: this.#decode,
        hooks: o.hooks,
      },
    });
    this.#catalog = new SealedPartCatalog(o.tableDir, new ClaimRegistry(), 'materializer', o.logger);
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

  /** Finishes publications a crash interrupted. Runs before any new plan. */
  async resume(): Promise<void> {
    const result = await this.#publisher.resume(this.#o.mode);
    if (result.finished + result.rewritten > 0) {
      this.#o.logger.info({ event: 'publication.recovery', ...result }, 'interrupted publications finished');
    }
  }

  /** Plans what is ready and publishes it; returns the publications made. */
  async runOnce(now = Date.now()): Promise<PublicationResult[]> {
    // A plan left by a failed publication (or a crash) goes first, the same way recovery does it.
    await this.resume();
    // Nothing is in flight between runs and every ledger plan is finished: no part is in a plan.
    this.#inPlan.clear();
    const { parts } = await this.#catalog.refresh();
    const out = planPublications({
      parts,
      ownership: this.#ownership,
      liveOwner: this.#o.owner,
      planned: this.#inPlan,
      maxPublicationBytes: this.#o.maxPublicationBytes,
      maxPublicationDelayMs: this.#o.maxPublicationDelayMs,
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
    const results: PublicationResult[] = [];
    const inFlight = this.#o.mode === 'streamed' ? 2 : 1;
    for (let i = 0; i < plans.length; i += inFlight) {
      const batch = plans.slice(i, i + inFlight);
      const settled = await Promise.allSettled(batch.map((p) => this.#publish(p)));
      for (const r of settled) {
        if (r.status === 'fulfilled') results.push(r.value);
      }
      const failed = settled.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
    }
    return results;
  }

  /**
   * Compaction by one replica at a time: the owner of the first partition of the
   * first topic (by the chains it was given). A commit conflict with a concurrent
   * append is retried inside; any other failure is logged, never fatal.
   */
  async optimizeIfLeader(): Promise<boolean> {
    const first = [...this.#ownership.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))[0];
    if (!first || first[1].chain.at(-1)?.owner !== this.#o.owner) return false;
    try {
      const t0 = performance.now();
      if (!(await this.#lance.optimize())) return false;
      this.#o.logger.info(
        { event: 'lance.optimized', seconds: (performance.now() - t0) / 1000 },
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

  /** A snapshot; it drains the recent publications and permit waits it reports. */
  stats(): MaterializerStats {
    const recent = this.#recent;
    this.#recent = [];
    return {
      recent,
      recentPermitWaits: [this.#fetch, this.#decode].map((p) => ({ kind: p.kind, seconds: p.drainWaits() })),
      ...this.#stats,
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
    };
    await ledger.writePlan(this.#o.tableDir, plan);
    crashPoint('after-plan');
    return plan;
  }

  async #publish(plan: Plan): Promise<PublicationResult> {
    try {
      const result = await this.#publisher.publish(plan, this.#o.mode);
      this.#stats.publications += 1;
      this.#stats.publishedRows += result.rows;
      this.#stats.publishedBytes += result.bytes;
      this.#last = result;
      if (this.#recent.length < 10_000) this.#recent.push(result);
      for (const p of plan.parts) {
        this.#catalog.forget(p.path);
        this.#inPlan.delete(p.path);
      }
      this.#o.logger.info(
        { event: 'publication', table: plan.table, parts: plan.parts.length, ...result },
        'published into Lance',
      );
      return result;
    } catch (error) {
      this.#stats.failedPublications += 1;
      this.#o.logger.error(
        { event: 'publication.failed', id: plan.id, err: error },
        'publication failed; it will be retried',
      );
      throw error;
    }
  }
}

async function countKept(d: PartDecision): Promise<number> {
  const { batches } = await readSealedPart(d.part.path);
  return countKeptRows(batches, d.keep);
}
