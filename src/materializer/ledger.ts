import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { fsyncDirectory, mkdirDurably, writeFileAtomically } from '../common/fs-durable';
import type { WriteMode } from '../lance/lance-table';
import type { StagingEpoch } from '../staging/epoch';
import type { PartOffsetRange } from '../staging/sealed-part';
import { crashPoint } from '../faults/crash-points';

/** How a plan's rows go into Lance: a plain append, or insert-if-absent on the row key. */
export type PlanWrite = WriteMode;

/** The rows of one partition of a part that a publication keeps: offsets in [from, below). */
export interface KeepRange {
  readonly topic: string;
  readonly partition: number;
  readonly from: number;
  readonly below: number;
}

export interface PlanPart {
  readonly path: string;
  readonly bytes: number;
  readonly checksum: string;
  readonly epoch: StagingEpoch;
  /** Rows in the part, and rows kept after cuts. */
  readonly rows: number;
  readonly keptRows: number;
  readonly ranges: readonly PartOffsetRange[];
  readonly keep: readonly KeepRange[];
}

/**
 * An immutable, durable publication plan: whole sealed parts (never a split record)
 * of one schema, and per partition the offsets to keep (the ceiling rule's cuts).
 * A part is in at most one plan.
 */
export interface Plan {
  readonly id: string;
  readonly table: string;
  readonly schemaKey: string;
  readonly createdAt: number;
  readonly parts: readonly PlanPart[];
  readonly rows: number;
  readonly bytes: number;
  /**
   * 'insert-if-absent': the plan holds rows of an epoch the ownership chain had dropped
   * (some may be a redundant copy of rows another epoch published), or it is published
   * in 'published' commit mode. Absent (plans written before this field, and ordinary
   * plans in 'staged' mode): the replica's mode decides.
   */
  readonly write?: PlanWrite;
}

/** Offsets of one partition present in a publication, as runs of consecutive offsets: exact, never covering another publication's rows. */
export interface OffsetInterval {
  readonly topic: string;
  readonly partition: number;
  readonly first: number;
  readonly last: number;
  /** The rows' `_topic_id` (their topic's incarnation); absent for rows staged before it existed. */
  readonly topicId?: string;
}

/** Written (durably) right before the Lance add; what recovery checks the table against. */
export interface WritingRecord {
  readonly id: string;
  readonly rows: number;
  readonly intervals: readonly OffsetInterval[];
  /**
   * A table version at or below the newest when the add began: a count of the add's
   * outcome reads versions by number from it (absent in records written before it was
   * kept: those counts read the listed newest version).
   */
  readonly fromVersion?: number;
}

export const plansDir = (tableDir: string): string => path.join(tableDir, 'plans');

/**
 * A plan names its parts relative to the table's staging directory: a data directory
 * restored or mounted at another path must find its own parts, never delete the
 * original's and publish its copies a second time (seen in qualification). Plans
 * written with absolute paths still resolve to them.
 */
const storedPartPath = (tableDir: string, partPath: string): string => {
  const relative = path.relative(tableDir, partPath);
  return relative.startsWith('..') || path.isAbsolute(relative) ? partPath : relative;
};
type LedgerKind = 'plan' | 'writing' | 'published' | 'quarantined';
const file = (tableDir: string, id: string, kind: LedgerKind) =>
  path.join(plansDir(tableDir), `${id}.${kind}.json`);

/**
 * Written (durably) before a plan that failed permanently is set aside: from then on
 * the plan is never published, and a restart finishes moving its parts to quarantine.
 */
export interface QuarantineRecord {
  readonly id: string;
  readonly reason: string;
  readonly message: string;
  readonly context: Readonly<Record<string, unknown>>;
  readonly attempts: number;
  readonly at: number;
}

/** One publication as the ledger holds it; no plan: a cleanup was interrupted after the plan went. */
export interface LedgerEntry {
  readonly id: string;
  readonly plan: Plan | undefined;
  readonly writing: WritingRecord | undefined;
  readonly published: boolean;
  readonly quarantined: QuarantineRecord | undefined;
}

/** The publication ledger: plan → writing → published, each step a durable file. */
export const ledger = {
  async writePlan(tableDir: string, plan: Plan): Promise<void> {
    await mkdirDurably(plansDir(tableDir));
    const stored: Plan = {
      ...plan,
      parts: plan.parts.map((part) => ({ ...part, path: storedPartPath(tableDir, part.path) })),
    };
    await writeFileAtomically(file(tableDir, plan.id, 'plan'), JSON.stringify(stored));
  },
  async markWriting(tableDir: string, record: WritingRecord): Promise<void> {
    await writeFileAtomically(file(tableDir, record.id, 'writing'), JSON.stringify(record));
  },
  async markPublished(tableDir: string, id: string, version: number | undefined): Promise<void> {
    await writeFileAtomically(
      file(tableDir, id, 'published'),
      JSON.stringify({ id, version, at: Date.now() }),
    );
  },
  async markQuarantined(tableDir: string, record: QuarantineRecord): Promise<void> {
    await writeFileAtomically(file(tableDir, record.id, 'quarantined'), JSON.stringify(record));
  },
  /**
   * Removes a finished publication's files, after its sources are gone (deleted or
   * quarantined). The final mark (`published` or `quarantined`) goes last and only once
   * the others' removal is durable: at every point of a kill the ledger says "done",
   * never a bare plan whose sources no longer exist, which would look like work to do.
   */
  async forget(tableDir: string, id: string): Promise<void> {
    await fsp.rm(file(tableDir, id, 'plan'), { force: true });
    crashPoint('after-plan-forgotten');
    await fsp.rm(file(tableDir, id, 'writing'), { force: true });
    crashPoint('after-writing-forgotten');
    await fsyncDirectory(plansDir(tableDir));
    await fsp.rm(file(tableDir, id, 'published'), { force: true });
    await fsp.rm(file(tableDir, id, 'quarantined'), { force: true });
  },
  /** Whether a publication reached `writing` (its add may have happened). */
  async isWriting(tableDir: string, id: string): Promise<boolean> {
    return fsp.access(file(tableDir, id, 'writing')).then(
      () => true,
      () => false,
    );
  },
  /** Every publication the ledger knows of, by id (ids are ULIDs: creation order). */
  async list(tableDir: string): Promise<LedgerEntry[]> {
    const names = new Set(await fsp.readdir(plansDir(tableDir)).catch(() => [] as string[]));
    const ids = new Set<string>();
    for (const name of names) {
      const m = /^(.+)\.(plan|writing|published|quarantined)\.json$/.exec(name);
      if (m) ids.add(m[1]!);
    }
    const out: LedgerEntry[] = [];
    for (const id of [...ids].sort()) {
      const read = async <T>(kind: LedgerKind): Promise<T | undefined> =>
        names.has(`${id}.${kind}.json`)
          ? (JSON.parse(await fsp.readFile(file(tableDir, id, kind), 'utf8')) as T)
          : undefined;
      const plan = await read<Plan>('plan');
      out.push({
        id,
        plan: plan && {
          ...plan,
          parts: plan.parts.map((part) => ({ ...part, path: path.resolve(tableDir, part.path) })),
        },
        writing: await read<WritingRecord>('writing'),
        published: names.has(`${id}.published.json`),
        quarantined: await read<QuarantineRecord>('quarantined'),
      });
    }
    return out;
  },
};
