import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { errorMessage } from '../common/errors';
import type { Logger } from '../common/logger';
import type { TopicPartitionKey } from '../common/offsets';
import { TableRefusedError } from '../lance/table-opening';
import type { PartitionOwnership } from '../ownership/partition-ownership';
import type { SealedPart } from '../staging/sealed-part';
import type { Drain, Turn } from './materializer';
import type { MaterializerStats } from './materializer-stats';
import { PartialPublicationError } from './publication-errors';
import type { TableKeeperRole } from './index-upkeep';
import type { PublicationResult } from './publisher';

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

/**
 * Why a table publishes nothing now: `refused` (its existing Lance table refuses the
 * definition: a declared type, its mode), `failing` (opening it or its last turn threw:
 * the store, the disk), `retrying` (plans of it wait for a retry after failed attempts).
 */
export type StallReason = 'refused' | 'failing' | 'retrying';

/** One table's state, as the worker reports it to the host. */
export interface TableReport {
  readonly table: string;
  readonly stalled?: StallReason;
  /** Undefined while the table is not open (refused, or its opening failed). */
  readonly stats?: MaterializerStats;
}

export interface TableSetOptions {
  /** `<dataDir>/staging`: every directory under it is a table's staging (tableStagingDir). */
  readonly stagingRoot: string;
  /** Opens a table's publisher, its checks first (table-opening.ts); a throw stalls only that table. */
  readonly open: (table: string, tableDir: string) => Promise<ServedTable>;
  readonly upkeep?: (table: string, served: ServedTable) => TableUpkeep;
  /** Publication attempts per table per round while other tables are served (a table alone is not bounded). */
  readonly attemptsPerTurn: number;
  /** Turns of different tables run at once (default 1). */
  readonly turnsInFlight?: number;
  /** Compaction of each table this often (0: never); only where the table is kept (optimizeIfLeader). */
  readonly optimizeEveryMs: number;
  readonly logger: Logger;
}

/** The longest a failing table waits before its next try (a refused one waits this long between checks). */
const MAX_BACKOFF_MS = 30_000;
const MIN_BACKOFF_MS = 500;

interface Entry {
  readonly table: string;
  readonly dir: string;
  served?: ServedTable;
  upkeep?: TableUpkeep;
  /** Parts sealed before the table was open: handed over when it opens. */
  sealedBeforeOpen: SealedPart[];
  stalled?: StallReason;
  backoffMs: number;
  retryAt: number;
  lastOptimize: number;
}

/**
 * Every table one materializer worker serves: one publisher per table directory under
 * the staging root, created when the directory is first seen (listed at start, or named
 * by a sealed part), all sharing the worker's permits and source reservation (injected
 * into each Materializer). Tables take turns: each round serves every table once, from
 * a rotating first table (up to `turnsInFlight` tables' turns at once), and a table's
 * turn attempts at most `attemptsPerTurn` publications while others are served, so a
 * quiet table's publication waits for at most one turn of each other table. A table that fails backs off alone and says so
 * once (event `table.stalled`), and once again when it publishes again.
 */
export class TableSet {
  readonly #o: TableSetOptions;
  readonly #entries = new Map<string, Entry>();
  #ownership: ReadonlyMap<TopicPartitionKey, PartitionOwnership> | undefined;
  #nextFirst = 0;

  constructor(o: TableSetOptions) {
    this.#o = o;
  }

  /** Every table directory under the staging root (a missing root: none yet). */
  async discover(): Promise<void> {
    const entries = await fsp.readdir(this.#o.stagingRoot, { withFileTypes: true }).catch(() => []);
    for (const e of entries) if (e.isDirectory() && !e.name.startsWith('.')) this.#see(e.name);
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
   * One round: every table not backing off gets its turn. Returns whether a table used
   * its whole turn (more is ready: the caller runs the next round without waiting).
   */
  async round(now = Date.now()): Promise<boolean> {
    const order = this.#rotation().filter((e) => e.retryAt <= now);
    const bounded = this.#entries.size > 1;
    let more = false;
    let fatal: Error | undefined;
    // Turns of different tables overlap up to turnsInFlight: their tables never conflict,
    // and a publication's time is mostly waits (fsyncs, the Lance commit). Memory stays
    // bounded by the shared permits and reservation, whatever the overlap.
    let next = 0;
    const runner = async () => {
      while (next < order.length && fatal === undefined) {
        const entry = order[next++]!;
        const used = await this.#turn(entry, bounded, now).catch((error: unknown) => {
          fatal = error instanceof Error ? error : new Error(String(error));
          return false;
        });
        if (used) more = true;
      }
    };
    const width = Math.max(1, Math.min(this.#o.turnsInFlight ?? 1, order.length));
    await Promise.all(Array.from({ length: width }, runner));
    if (fatal !== undefined) throw fatal;
    return more;
  }

  /** One table's turn; true when it used the whole turn (more is ready). Throws only what no table may survive. */
  async #turn(entry: Entry, bounded: boolean, now: number): Promise<boolean> {
    const turn: Turn | undefined = bounded ? { attempts: this.#o.attemptsPerTurn } : undefined;
    try {
      const served = await this.#opened(entry);
      await served.runOnce(Date.now(), undefined, turn);
      if (this.#o.optimizeEveryMs > 0 && Date.now() - entry.lastOptimize >= this.#o.optimizeEveryMs) {
        entry.lastOptimize = Date.now();
        await served.optimizeIfLeader();
      }
      entry.upkeep?.tick();
      entry.backoffMs = 0;
      this.#mark(entry, served.left.retryingPlans > 0 ? 'retrying' : undefined);
    } catch (error) {
      if (error instanceof PartialPublicationError) throw error;
      this.#failed(entry, error, now);
      return false;
    }
    return turn !== undefined && turn.attempts <= 0;
  }

  /**
   * A graceful stop's last publications, every table in turns, small groups included,
   * starting nothing after `until` (epoch ms); a table that fails stops draining alone.
   * Returns what was published and what is left.
   */
  async drain(until: number): Promise<DrainOutcome> {
    let publications = 0;
    let rows = 0;
    const failed = new Map<string, string>();
    const drain: Drain = { until };
    const bounded = this.#entries.size > 1;
    while (Date.now() < until) {
      let published = 0;
      let retrying = 0;
      for (const entry of this.#rotation()) {
        if (Date.now() >= until) break;
        if (failed.has(entry.table) || entry.stalled === 'refused') continue;
        try {
          const served = await this.#opened(entry);
          const turn = bounded ? { attempts: this.#o.attemptsPerTurn } : undefined;
          const results = await served.runOnce(Date.now(), drain, turn);
          published += results.length;
          rows += results.reduce((n, r) => n + r.rows, 0);
          retrying += served.left.retryingPlans;
        } catch (error) {
          if (error instanceof PartialPublicationError) throw error;
          // The store is down or slow: what is left waits for the next start.
          failed.set(entry.table, errorMessage(error));
        }
      }
      publications += published;
      if (published > 0) continue;
      // Nothing published: done, unless a failed plan waits for its retry (a slow store).
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
      ...(e.stalled ? { stalled: e.stalled } : {}),
      ...(e.served ? { stats: e.served.stats() } : {}),
    };
  }

  #see(table: string, dir = path.join(this.#o.stagingRoot, table)): Entry {
    let entry = this.#entries.get(table);
    if (!entry) {
      entry = { table, dir, sealedBeforeOpen: [], backoffMs: 0, retryAt: 0, lastOptimize: Date.now() };
      this.#entries.set(table, entry);
    }
    return entry;
  }

  /** The tables in this round's order: the first moves by one every round. */
  #rotation(): Entry[] {
    const all = [...this.#entries.values()];
    if (all.length === 0) return all;
    const first = this.#nextFirst % all.length;
    this.#nextFirst = first + 1;
    return [...all.slice(first), ...all.slice(0, first)];
  }

  async #opened(entry: Entry): Promise<ServedTable> {
    if (entry.served) return entry.served;
    const served = await this.#o.open(entry.table, entry.dir);
    if (this.#ownership) served.setOwnership(this.#ownership);
    if (entry.sealedBeforeOpen.length > 0) served.sealed(entry.sealedBeforeOpen);
    entry.sealedBeforeOpen = [];
    entry.served = served;
    entry.upkeep = this.#o.upkeep?.(entry.table, served);
    return served;
  }

  #failed(entry: Entry, error: unknown, now: number): void {
    const refused = error instanceof TableRefusedError;
    entry.backoffMs = refused
      ? MAX_BACKOFF_MS
      : Math.min(MAX_BACKOFF_MS, Math.max(MIN_BACKOFF_MS, entry.backoffMs * 2));
    entry.retryAt = now + entry.backoffMs;
    this.#mark(entry, refused ? 'refused' : 'failing', error);
  }

  /** Records the table's state; a change is one log line (stalled with its cause, or publishing again). */
  #mark(entry: Entry, stalled: StallReason | undefined, error?: unknown): void {
    if (entry.stalled === stalled) return;
    const was = entry.stalled;
    entry.stalled = stalled;
    const logger = this.#o.logger;
    if (stalled === undefined) {
      logger.info(
        { event: 'table.resumed', table: entry.table, was },
        `table ${entry.table} publishes again`,
      );
      return;
    }
    const facts = {
      event: 'table.stalled',
      table: entry.table,
      reason: stalled,
      ...(error instanceof TableRefusedError ? { fields: error.problems.map((p) => p.field) } : {}),
      ...(error !== undefined ? { err: errorMessage(error) } : {}),
      ...(stalled !== 'retrying' ? { retryInMs: entry.backoffMs } : {}),
    };
    const what =
      stalled === 'refused'
        ? 'its Lance table refuses the definition'
        : stalled === 'failing'
          ? 'it failed'
          : 'plans of it wait for a retry';
    logger[stalled === 'retrying' ? 'warn' : 'error'](
      facts,
      `table ${entry.table} is stalled (${what}): its plans wait, the other tables go on`,
    );
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

async function countParts(dir: string): Promise<number> {
  const names = await fsp.readdir(dir).catch(() => [] as string[]);
  return names.filter((n) => n.endsWith('.arrows')).length;
}
