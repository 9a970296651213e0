import * as path from 'node:path';
import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import type { TopicPartitionKey } from '../common/offsets';
import type { PartitionOwnership } from '../ownership/partition-ownership';
import type { SealedPart } from '../staging/sealed-part';
import type { Drain, Turn } from './materializer';
import type { MaterializerStats } from './materializer-stats';
import { PartialPublicationError } from './publication-errors';
import type { TableKeeperRole } from './index-upkeep';
import type { PublicationResult } from './publisher';
import { TableStall, type StallReason } from './table-stall';
import { countParts, holdsWork, tablesWithWork } from './table-work';

/** What the table set asks of one table's publisher (a Materializer). */
export interface ServedTable extends TableKeeperRole {
  setOwnership(ownership: ReadonlyMap<TopicPartitionKey, PartitionOwnership>): void;
  sealed(parts: readonly SealedPart[]): void;
  runOnce(now?: number, drain?: Drain, turn?: Turn): Promise<PublicationResult[]>;
  optimizeIfLeader(): Promise<boolean>;
  readonly left: {
    readonly waitingParts: number;
    readonly unresolvableParts: number;
    readonly retryingPlans: number;
  };
  partsOnDisk(): Promise<number>;
  stats(): MaterializerStats;
  close(): void;
}

/** A table's background upkeep beside its publications (declared indexes, index-upkeep.ts). */
export interface TableUpkeep {
  tick(now?: number): void;
  abort(): void;
  stop(): Promise<void>;
}

/** One table's state, as the worker reports it to the host. */
export interface TableReport {
  readonly table: string;
  readonly stalled?: StallReason;
  /** Undefined while the table is not open (refused, or its opening failed). */
  readonly stats?: MaterializerStats;
  /** Sealed parts waiting in the staging directory of a table that is not open (a refused table's backlog). */
  readonly partsWaiting?: number;
}

export interface TableSetOptions {
  /** `<dataDir>/staging`: every directory under it is a table's staging (tableStagingDir). */
  readonly stagingRoot: string;
  /** Opens a table's publisher, its checks first (table-opening.ts); a throw stalls only that table. */
  readonly open: (table: string, tableDir: string) => Promise<ServedTable>;
  readonly upkeep?: (table: string, served: ServedTable) => TableUpkeep;
  /** Publication attempts per table per turn while other tables are served (a table alone is not bounded). */
  readonly attemptsPerTurn: number;
  /** Turns of different tables run at once (default 1). */
  readonly turnsInFlight?: number;
  /** Compaction of each table this often (0: never); only where the table is kept (optimizeIfLeader). */
  readonly optimizeEveryMs: number;
  /**
   * A publication found half (or twice) in its table stops the whole worker (the replica's
   * fatal, as for a definition with one fixed table) instead of stalling that table alone.
   */
  readonly damageIsFatal?: boolean;
  /**
   * A table served whether or not work waits in it, and never closed as idle: a definition's
   * one table, whose declared indexes are kept (a build a crash interrupted is finished) with
   * nothing staged.
   */
  readonly alwaysServed?: string;
  /** A table open with nothing to do for this long is closed (reopened by its next turn with work; default 5 min). */
  readonly idleCloseMs?: number;
  /** Tables kept open at most; beyond it the idle one served least recently is closed first (default 64). */
  readonly maxOpen?: number;
  /** In [0, 1): spreads each table's first compaction over optimizeEveryMs (default Math.random). */
  readonly random?: () => number;
  readonly logger: Logger;
}

/** Tables drained at once by a graceful stop (as many as the turns: a drain is mostly waits too). */
const DRAIN_WIDTH = 4;
const IDLE_CLOSE_MS = 5 * 60_000;
const MAX_OPEN = 64;
/**
 * A table whose last turn found nothing to do is not given another until a part is sealed
 * into it, or this long after (its index upkeep ticks then too). With 200 tables, every
 * poll's turn of each listed its directory and its ledger: ~1,600 listings a second. Kept
 * short: a quiet table's first record waited 8–10 s in two of nine bench runs with 10 s
 * here, not yet explained (bench/many-tables-levers.md); a wrong "nothing to do" costs at
 * most this.
 */
const QUIET_RECHECK_MS = 1_000;

interface Entry {
  readonly table: string;
  readonly dir: string;
  served?: ServedTable;
  upkeep?: TableUpkeep;
  /** Parts sealed before the table was open: handed over when it opens. */
  sealedBeforeOpen: SealedPart[];
  /** Why it publishes nothing now, and when it is tried again. */
  readonly stall: TableStall;
  /** Wants a turn: every poll asks each table once, and a table that used its whole turn asks again. */
  wanted: boolean;
  /** In a turn now (a table has at most one turn at a time). */
  inTurn: boolean;
  /** Its last turn used every attempt: more is ready. */
  more: boolean;
  /** Compacting now: kept out of turns until it ends. */
  compacting: boolean;
  /** The serial of its last turn's start: the due table with the lowest goes next (fairness). */
  lastTurn: number;
  nextOptimize: number;
  /** Sealed parts of a table not open, counted when its opening was refused or failed. */
  partsWaiting: number;
  /** When its last turn found work (or it was opened): idle tables are closed after idleCloseMs. */
  lastBusy: number;
  /** Its publisher and upkeep are being closed: no turn until that ended. */
  closing: boolean;
  /**
   * When a turn last found it with nothing to do (no publication, nothing waiting or
   * retrying) and no part was sealed into it since: no turn until QUIET_RECHECK_MS after.
   */
  quietSince: number | undefined;
  /** Counts the sealed() calls that named it: a turn that began before one is not quiet. */
  sealings: number;
}

/**
 * Every table one materializer worker serves: one publisher per table directory under
 * the staging root that holds work (sealed parts or ledger entries; listed at start, or
 * named by a sealed part), all sharing the worker's permits and source reservation
 * (injected into each Materializer).
 *
 * Tables take turns in `turnsInFlight` slots, with no round barrier: a slot that frees
 * takes the due table whose last turn is the oldest, so a table is served again only
 * after every other waiting table had a turn since its last one, and one table's slow
 * turn holds only its own slot. A table's turn attempts at most `attemptsPerTurn`
 * publications while others are served. Compaction runs in one slot of its own, outside
 * the turns (the table is kept out of turns meanwhile: it never overlaps its own
 * publications). A table that fails backs off alone and says so once (event
 * `table.stalled`), and once again when it publishes again.
 */
export class TableSet {
  readonly #o: TableSetOptions;
  readonly #entries = new Map<string, Entry>();
  #ownership: ReadonlyMap<TopicPartitionKey, PartitionOwnership> | undefined;
  #serial = 0;
  #turnsRunning = 0;
  #compaction: Promise<void> | undefined;
  /** A table that used its whole turn asks for another at once (the worker's loop); a round asks each once. */
  #continuous = false;
  #stopped = false;
  /** Resolved whenever a turn, a compaction or a closing ends (round() and stop() wait on it). */
  #changed: { promise: Promise<void>; resolve: () => void } = settleable();
  #fatal: Error | undefined;
  readonly #closings = new Set<Promise<void>>();

  constructor(o: TableSetOptions) {
    this.#o = o;
  }

  /** Every table directory under the staging root that holds work (a missing root: none yet). */
  async discover(): Promise<void> {
    for (const { table, dir } of await tablesWithWork(this.#o.stagingRoot)) this.#see(table, dir);
    if (this.#o.alwaysServed !== undefined) this.#see(this.#o.alwaysServed);
  }

  /** Parts just sealed: each part's table is its directory's name; a table first seen here joins the set. */
  sealed(parts: readonly SealedPart[]): void {
    const byDir = new Map<string, SealedPart[]>();
    for (const part of parts) {
      const dir = path.dirname(part.path);
      byDir.set(dir, [...(byDir.get(dir) ?? []), part]);
    }
    for (const [dir, ofTable] of byDir) {
      const entry = this.#see(path.basename(dir), dir);
      entry.quietSince = undefined;
      entry.sealings += 1;
      if (entry.served) entry.served.sealed(ofTable);
      else entry.sealedBeforeOpen.push(...ofTable);
    }
  }

  /** The broker's view of every partition, for every table's planner (tables may share topics). */
  setOwnership(ownership: ReadonlyMap<TopicPartitionKey, PartitionOwnership>): void {
    this.#ownership = ownership;
    for (const e of this.#entries.values()) e.served?.setOwnership(ownership);
  }

  get tables(): string[] {
    return [...this.#entries.keys()];
  }

  /**
   * The worker's poll: every table asks for a turn, and free slots take due tables at
   * once. Never waits: turns end on their own and their slots take the next due table
   * (a table that used its whole turn asks again at once). Throws what no table may
   * survive (a damaged table where damage is fatal), seen at the poll after it.
   */
  poll(now = Date.now()): void {
    if (this.#fatal) throw this.#fatal;
    this.#continuous = true;
    for (const e of this.#entries.values()) e.wanted = true;
    this.#serve(now);
  }

  /**
   * One pass through the same slots, awaited (tests and benches): every due table gets
   * one turn; resolves when those turns have ended. True when a table used its whole
   * turn (more is ready). A compaction that holds a table does not hold the pass.
   */
  async round(now = Date.now()): Promise<boolean> {
    this.#continuous = false;
    for (const e of this.#entries.values()) e.wanted = true;
    const before = new Map([...this.#entries.values()].map((e) => [e, e.lastTurn]));
    for (;;) {
      this.#serve(now);
      if (this.#fatal) throw this.#fatal;
      const waiting = [...this.#entries.values()].some(
        (e) =>
          e.inTurn ||
          e.closing ||
          (!this.#stopped &&
            e.wanted &&
            !e.compacting &&
            e.stall.retryAt <= now &&
            e.stall.reason !== 'damaged'),
      );
      if (!waiting) break;
      await this.#changed.promise;
    }
    return [...this.#entries.values()].some((e) => e.more && e.lastTurn !== before.get(e));
  }

  /** No turn and no compaction starts after this; resolves when the running ones have ended. */
  async stop(): Promise<void> {
    this.#stopped = true;
    while (this.#turnsRunning > 0 || this.#compaction || this.#closings.size > 0) await this.#changed.promise;
  }

  /**
   * A graceful stop's last publications (after stop()): up to four tables at once, small
   * groups included, starting nothing after `until` (epoch ms); tables backing off after
   * a failure are tried last, and a table that fails stops draining alone. It goes on
   * while a pass published, or used a table's whole turn (a finished ledger entry, a
   * set-aside: attempts with no publication), and waits for plans that wait for their
   * retry. Returns what was published and what is left.
   */
  async drain(until: number): Promise<DrainOutcome> {
    let publications = 0;
    let rows = 0;
    const failed = new Map<string, string>();
    const drain: Drain = { until };
    const bounded = this.#entries.size > 1;
    while (Date.now() < until) {
      let progressed = false;
      let retrying = 0;
      const order = [...this.#entries.values()]
        .filter((e) => !failed.has(e.table) && e.stall.reason !== 'refused' && e.stall.reason !== 'damaged')
        .sort((a, b) => Number(a.stall.reason === 'failing') - Number(b.stall.reason === 'failing'));
      let next = 0;
      const runner = async () => {
        while (next < order.length && Date.now() < until) {
          const entry = order[next++]!;
          try {
            // A table closed while idle is opened again only if work waits in it.
            if (!entry.served && entry.sealedBeforeOpen.length === 0 && !(await holdsWork(entry.dir)))
              continue;
            const served = await this.#opened(entry);
            const turn = bounded ? { attempts: this.#o.attemptsPerTurn } : undefined;
            const results = await served.runOnce(Date.now(), drain, turn);
            publications += results.length;
            rows += results.reduce((n, r) => n + r.rows, 0);
            retrying += served.left.retryingPlans;
            if (results.length > 0 || (turn !== undefined && turn.attempts <= 0)) progressed = true;
          } catch (error) {
            if (error instanceof PartialPublicationError && !this.#o.damageIsFatal) {
              this.#damaged(entry, error);
              continue;
            }
            if (error instanceof PartialPublicationError) throw error;
            // The store is down or slow: what is left waits for the next start.
            failed.set(entry.table, errorMessage(error));
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(DRAIN_WIDTH, Math.max(1, order.length)) }, runner));
      if (progressed) continue;
      // Nothing attempted: done, unless a failed plan waits for its retry (a slow store).
      if (retrying === 0) break;
      await new Promise((resolve) => setTimeout(resolve, Math.min(1_000, Math.max(0, until - Date.now()))));
    }
    const left: DrainOutcome['left'][number][] = [];
    for (const entry of this.#entries.values()) {
      const served = entry.served;
      const parts = served ? await served.partsOnDisk() : await countParts(entry.dir);
      const l = served?.left ?? { waitingParts: 0, unresolvableParts: 0, retryingPlans: 0 };
      left.push({
        table: entry.table,
        parts,
        ...l,
        ...(failed.has(entry.table) ? { err: failed.get(entry.table) } : {}),
      });
    }
    return { publications, rows, left, timedOut: Date.now() >= until };
  }

  /** Each table's state and its materializer's stats (drained: the counts' growth since the last report). */
  reports(): TableReport[] {
    return [...this.#entries.values()].map((e) => this.#report(e));
  }

  /** One table's report (after each of its publications). */
  report(table: string): TableReport | undefined {
    const entry = this.#entries.get(table);
    return entry && this.#report(entry);
  }

  /** No upkeep round begins after this (a stop's drain waits for nothing new). */
  abortUpkeep(): void {
    for (const e of this.#entries.values()) e.upkeep?.abort();
  }

  async stopUpkeep(): Promise<void> {
    await Promise.all([...this.#entries.values()].flatMap((e) => (e.upkeep ? [e.upkeep.stop()] : [])));
  }

  close(): void {
    for (const e of this.#entries.values()) e.served?.close();
  }

  #report(e: Entry): TableReport {
    return {
      table: e.table,
      ...(e.stall.reason ? { stalled: e.stall.reason } : {}),
      ...(e.served ? { stats: e.served.stats() } : { partsWaiting: e.partsWaiting }),
    };
  }

  #see(table: string, dir = path.join(this.#o.stagingRoot, table)): Entry {
    let entry = this.#entries.get(table);
    if (!entry) {
      const every = this.#o.optimizeEveryMs;
      entry = {
        table,
        dir,
        sealedBeforeOpen: [],
        stall: new TableStall(table, this.#o.logger),
        wanted: true,
        inTurn: false,
        more: false,
        compacting: false,
        lastTurn: 0,
        // Spread over one period: tables found together at start do not all compact together.
        nextOptimize: Date.now() + Math.floor((this.#o.random ?? Math.random)() * every),
        partsWaiting: 0,
        lastBusy: Date.now(),
        closing: false,
        quietSince: undefined,
        sealings: 0,
      };
      this.#entries.set(table, entry);
    }
    return entry;
  }

  /** Fills the free slots: turns of the due tables, oldest last turn first, and one compaction beside them. */
  #serve(now: number): void {
    if (this.#stopped || this.#fatal) return;
    this.#closeIdle(now);
    this.#compactDue();
    const width = Math.max(1, this.#o.turnsInFlight ?? 1);
    while (this.#turnsRunning < width) {
      let best: Entry | undefined;
      for (const e of this.#entries.values()) {
        if (
          !e.wanted ||
          e.inTurn ||
          e.compacting ||
          e.closing ||
          e.stall.retryAt > now ||
          e.stall.reason === 'damaged'
        )
          continue;
        // Wall time, as quietSince is: a round may be given a `now` of its own (tests).
        if (e.quietSince !== undefined && Date.now() - e.quietSince < QUIET_RECHECK_MS) {
          e.wanted = false;
          continue;
        }
        if (!best || e.lastTurn < best.lastTurn) best = e;
      }
      if (!best) return;
      this.#start(best);
    }
  }

  #start(entry: Entry): void {
    entry.wanted = false;
    entry.inTurn = true;
    entry.lastTurn = ++this.#serial;
    this.#turnsRunning += 1;
    const bounded = this.#entries.size > 1;
    void this.#turn(entry, bounded)
      .then(
        (more) => {
          entry.more = more;
          // In the worker's loop a table with more ready asks again at once (behind every waiting table).
          if (more && this.#continuous) entry.wanted = true;
        },
        (error: unknown) => {
          this.#fatal ??= error instanceof Error ? error : new Error(String(error));
        },
      )
      .finally(() => {
        entry.inTurn = false;
        this.#turnsRunning -= 1;
        this.#serve(Date.now());
        this.#signal();
      });
  }

  /**
   * Closes open tables with nothing to do (no part waiting, no plan retrying): those idle
   * for idleCloseMs, and beyond maxOpen the ones served least recently. Each keeps a Lance
   * handle (and an index keeper); a table with work is reopened by its next turn.
   */
  #closeIdle(now: number): void {
    const idle = (e: Entry) => {
      if (!e.served || e.inTurn || e.compacting || e.closing || e.table === this.#o.alwaysServed)
        return false;
      const l = e.served.left;
      return l.waitingParts === 0 && l.retryingPlans === 0 && l.unresolvableParts === 0;
    };
    const open = [...this.#entries.values()].filter((e) => e.served);
    const idleCloseMs = this.#o.idleCloseMs ?? IDLE_CLOSE_MS;
    let excess = open.length - (this.#o.maxOpen ?? MAX_OPEN);
    for (const e of open.filter(idle).sort((a, b) => a.lastTurn - b.lastTurn)) {
      if (excess > 0 || now - e.lastBusy >= idleCloseMs) {
        excess -= 1;
        this.#close(e);
      }
    }
  }

  #close(entry: Entry): void {
    const served = entry.served!;
    const upkeep = entry.upkeep;
    entry.served = undefined;
    entry.upkeep = undefined;
    entry.closing = true;
    // An index round in flight ends first (its native call is never abandoned), then the handles close.
    const closing = (upkeep?.stop() ?? Promise.resolve())
      .then(() => served.close())
      .catch((error: unknown) =>
        this.#o.logger.warn(
          { event: 'table.close.failed', table: entry.table, err: errorMessage(error) },
          'closing an idle table failed',
        ),
      )
      .finally(() => {
        entry.closing = false;
        this.#closings.delete(closing);
        this.#signal();
      });
    this.#closings.add(closing);
  }

  /** One compaction at a time, of the table that waited longest for it, never during its turn. */
  #compactDue(): void {
    if (this.#compaction || this.#o.optimizeEveryMs <= 0) return;
    const now = Date.now();
    let due: Entry | undefined;
    for (const e of this.#entries.values()) {
      if (!e.served || e.inTurn || e.stall.reason === 'damaged' || e.nextOptimize > now) continue;
      if (!due || e.nextOptimize < due.nextOptimize) due = e;
    }
    if (!due) return;
    const entry = due;
    const served = entry.served!;
    entry.compacting = true;
    // compact() logs its own failure and never throws; a throw here is a bug, not the table's state.
    this.#compaction = served
      .optimizeIfLeader()
      .then(
        () => undefined,
        (error: unknown) =>
          this.#o.logger.warn(
            { event: 'lance.optimize.failed', table: entry.table, err: errorMessage(error) },
            'compaction failed; will try again',
          ),
      )
      .finally(() => {
        entry.compacting = false;
        entry.nextOptimize = Date.now() + this.#o.optimizeEveryMs;
        this.#compaction = undefined;
        this.#serve(Date.now());
        this.#signal();
      });
  }

  #signal(): void {
    const done = this.#changed;
    this.#changed = settleable();
    done.resolve();
  }

  /** One table's turn; true when it used the whole turn (more is ready). Throws only what no table may survive. */
  async #turn(entry: Entry, bounded: boolean): Promise<boolean> {
    const turn: Turn | undefined = bounded ? { attempts: this.#o.attemptsPerTurn } : undefined;
    const sealings = entry.sealings;
    try {
      if (
        !entry.served &&
        entry.table !== this.#o.alwaysServed &&
        entry.sealedBeforeOpen.length === 0 &&
        !(await holdsWork(entry.dir))
      ) {
        // Nothing waits (its parts were moved away, or it was all published): not opened, not stalled.
        entry.stall.idle();
        entry.partsWaiting = 0;
        if (entry.sealings === sealings) entry.quietSince = Date.now();
        return false;
      }
      const served = await this.#opened(entry);
      const results = await served.runOnce(Date.now(), undefined, turn);
      const l = served.left;
      if (results.length > 0 || l.waitingParts + l.retryingPlans + l.unresolvableParts > 0)
        entry.lastBusy = Date.now();
      // A part sealed during the run may have missed its listing: only a turn none came during is quiet.
      else if (
        entry.table !== this.#o.alwaysServed &&
        entry.sealings === sealings &&
        (turn === undefined || turn.attempts > 0)
      )
        entry.quietSince = Date.now();
      entry.upkeep?.tick();
      entry.stall.served(served.left.retryingPlans > 0);
    } catch (error) {
      if (error instanceof PartialPublicationError) {
        if (this.#o.damageIsFatal) throw error;
        this.#damaged(entry, error);
        return false;
      }
      if (!entry.served) entry.partsWaiting = await countParts(entry.dir);
      entry.stall.failed(error, Date.now());
      return false;
    }
    return turn !== undefined && turn.attempts <= 0;
  }

  async #opened(entry: Entry): Promise<ServedTable> {
    if (entry.served) return entry.served;
    const served = await this.#o.open(entry.table, entry.dir);
    if (this.#ownership) served.setOwnership(this.#ownership);
    if (entry.sealedBeforeOpen.length > 0) served.sealed(entry.sealedBeforeOpen);
    entry.sealedBeforeOpen = [];
    entry.served = served;
    entry.partsWaiting = 0;
    entry.lastBusy = Date.now();
    entry.upkeep = this.#o.upkeep?.(entry.table, served);
    return served;
  }

  /** A publication found half or twice in the table: that table stops until an operator repairs it and restarts. */
  #damaged(entry: Entry, error: PartialPublicationError): void {
    entry.wanted = false;
    entry.stall.damaged(error);
  }
}

export interface DrainOutcome {
  readonly publications: number;
  readonly rows: number;
  readonly left: readonly {
    readonly table: string;
    readonly parts: number;
    readonly waitingParts: number;
    readonly unresolvableParts: number;
    readonly retryingPlans: number;
    readonly err?: string;
  }[];
  readonly timedOut: boolean;
}

function settleable(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
