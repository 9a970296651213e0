import { readdirSync } from 'node:fs';
import { plansDir } from '../../src/materializer/ledger';
import { parsePartName } from '../../src/staging/part-name';
import { tableStagingDir } from '../../src/staging/table-staging';

/** Publications of a data dir's ledger that are not finished: planned (plan only) or `writing`. */
export interface OpenPublications {
  readonly planned: string[];
  readonly writing: string[];
}

/**
 * Reads the replica's publication ledger (<dataDir>/staging/<table>/plans) as it stands:
 * the campaign's surest sign that a publication is under way (a `writing` entry without
 * its `published` mark), to kill into, and to say afterwards what a kill interrupted.
 */
export function openPublications(dataDir: string, table: string): OpenPublications {
  let names: string[];
  try {
    names = readdirSync(plansDir(tableStagingDir(dataDir, table)));
  } catch {
    return { planned: [], writing: [] };
  }
  const kinds = new Map<string, Set<string>>();
  for (const n of names) {
    const m = /^(.+)\.(plan|writing|published|quarantined)\.json$/.exec(n);
    if (!m) continue;
    let set = kinds.get(m[1]!);
    if (!set) kinds.set(m[1]!, (set = new Set()));
    set.add(m[2]!);
  }
  const planned: string[] = [];
  const writing: string[] = [];
  for (const [id, k] of kinds) {
    if (k.has('published') || k.has('quarantined')) continue;
    if (k.has('writing')) writing.push(id);
    else if (k.has('plan')) planned.push(id);
  }
  return { planned, writing };
}

/**
 * What a data dir still holds of the table's work: open and sealed parts and unfinished
 * publications. A quiescent replica holds none: every record published and cleaned up.
 */
export function leftOver(dataDir: string, table: string): string[] {
  let names: string[];
  try {
    names = readdirSync(tableStagingDir(dataDir, table));
  } catch {
    names = [];
  }
  const parts = names.map((n) => parsePartName(n)).filter((p) => p !== undefined);
  const open = parts.filter((p) => p.state === 'open').length;
  const sealed = parts.filter((p) => p.state === 'sealed').length;
  const pubs = openPublications(dataDir, table);
  return [
    open > 0 ? `${open} open parts` : '',
    sealed > 0 ? `${sealed} sealed parts` : '',
    pubs.planned.length > 0 ? `${pubs.planned.length} planned publications` : '',
    pubs.writing.length > 0 ? `${pubs.writing.length} \`writing\` publications` : '',
  ].filter(Boolean);
}
