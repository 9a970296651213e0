import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { writeFileAtomically } from '../common/fs-durable';
import type { StagingEpoch } from '../staging/epoch';
import type { PartOffsetRange } from '../staging/sealed-part';

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
}

/** Offsets of one partition present in a publication, as runs of consecutive offsets: exact, never covering another publication's rows. */
export interface OffsetInterval {
  readonly topic: string;
  readonly partition: number;
  readonly first: number;
  readonly last: number;
}

/** Written (durably) right before the Lance add; what recovery checks the table against. */
export interface WritingRecord {
  readonly id: string;
  readonly rows: number;
  readonly intervals: readonly OffsetInterval[];
}

export const plansDir = (tableDir: string): string => path.join(tableDir, 'plans');
const file = (tableDir: string, id: string, kind: 'plan' | 'writing' | 'published') =>
  path.join(plansDir(tableDir), `${id}.${kind}.json`);

/** The publication ledger: plan → writing → published, each step a durable file. */
export const ledger = {
  async writePlan(tableDir: string, plan: Plan): Promise<void> {
    await fsp.mkdir(plansDir(tableDir), { recursive: true });
    await writeFileAtomically(file(tableDir, plan.id, 'plan'), JSON.stringify(plan));
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
  /** Removes a finished publication's files (after its sources are gone). */
  async forget(tableDir: string, id: string): Promise<void> {
    for (const kind of ['published', 'writing', 'plan'] as const) {
      await fsp.rm(file(tableDir, id, kind), { force: true });
    }
  },
  async list(
    tableDir: string,
  ): Promise<{ plan: Plan; writing: WritingRecord | undefined; published: boolean }[]> {
    const names = await fsp.readdir(plansDir(tableDir)).catch(() => [] as string[]);
    const ids = names.filter((n) => n.endsWith('.plan.json')).map((n) => n.slice(0, -'.plan.json'.length));
    const out = [];
    for (const id of ids.sort()) {
      const plan = JSON.parse(await fsp.readFile(file(tableDir, id, 'plan'), 'utf8')) as Plan;
      const writingText = await fsp.readFile(file(tableDir, id, 'writing'), 'utf8').catch(() => undefined);
      const published = names.includes(`${id}.published.json`);
      out.push({
        plan,
        writing: writingText ? (JSON.parse(writingText) as WritingRecord) : undefined,
        published,
      });
    }
    return out;
  },
};
