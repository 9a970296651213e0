import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { plansDir } from './ledger';

/** Sealed parts in a table's staging directory (none when it is gone). */
export async function countParts(dir: string): Promise<number> {
  const names = await fsp.readdir(dir).catch(() => [] as string[]);
  return names.filter((n) => n.endsWith('.arrows')).length;
}

/** Whether a table's staging directory holds work: sealed parts, or publications in its ledger. */
export async function holdsWork(dir: string): Promise<boolean> {
  if ((await countParts(dir)) > 0) return true;
  const plans = await fsp.readdir(plansDir(dir)).catch(() => [] as string[]);
  return plans.some((n) => n.endsWith('.json'));
}

/**
 * The table directories under the staging root that hold work (a missing root: none yet).
 * An empty directory (a table dropped from the definition, all of it published) is left
 * alone: checked against today's definition it could only be refused, with nothing waiting.
 */
export async function tablesWithWork(stagingRoot: string): Promise<{ table: string; dir: string }[]> {
  const entries = await fsp.readdir(stagingRoot, { withFileTypes: true }).catch(() => []);
  const found: { table: string; dir: string }[] = [];
  for (const e of entries) {
    if (!e.isDirectory() || e.name.startsWith('.')) continue;
    const dir = path.join(stagingRoot, e.name);
    if (await holdsWork(dir)) found.push({ table: e.name, dir });
  }
  return found;
}
