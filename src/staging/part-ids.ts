import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { parsePartName } from './part-name';
import { QUARANTINE_DIR } from './quarantine';

/**
 * Ids of the staging parts (open or sealed) in a table's staging directory, and of the
 * parts in its quarantine whose rows are nowhere else: a part set aside as unreadable
 * (damaged bytes, no dead letters) must keep holding its epoch's commits, or they would
 * pass records that are in neither Lance nor the dead-letter output. Kafka still has
 * them: the next epoch (a restart or rejoin) starts at the last commit and consumes them
 * again. A part whose rows went to the dead-letter output (its `.reason.json` names the
 * file) no longer holds anything.
 */
export async function listPartIds(tableDir: string): Promise<string[]> {
  const ids: string[] = [];
  for (const n of await namesIn(tableDir)) {
    const parsed = parsePartName(n);
    if (parsed) ids.push(parsed.id);
  }
  const quarantine = path.join(tableDir, QUARANTINE_DIR);
  const names = await namesIn(quarantine);
  for (const n of names) {
    const parsed = parsePartName(n);
    if (!parsed) continue;
    if (
      names.includes(`${n}.reason.json`) &&
      (await rowsDeadLettered(path.join(quarantine, `${n}.reason.json`)))
    )
      continue;
    ids.push(parsed.id);
  }
  return ids;
}

async function namesIn(dir: string): Promise<string[]> {
  try {
    return await fsp.readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

async function rowsDeadLettered(reasonFile: string): Promise<boolean> {
  try {
    const reason = JSON.parse(await fsp.readFile(reasonFile, 'utf8')) as { deadLetterFile?: unknown };
    return typeof reason.deadLetterFile === 'string';
  } catch {
    return false; // unreadable: keep holding (a commit delayed, never a record lost)
  }
}
