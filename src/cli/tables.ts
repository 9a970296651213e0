import { existsSync, promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import type { ResolvedConsumer } from '../config';
import { ledger } from '../materializer/ledger';
import { openTableIfCommitted } from '../lance/open-if-committed';
import { parsePartName } from '../staging/part-name';
import { QUARANTINE_DIR } from '../staging/quarantine';
import { lanceUriOf } from './lance-read';

/*
 * The tables of one definition, for the operator's commands (inspect, compact): a
 * definition that routes (a `{topic}` template, a route function) writes many tables,
 * each with its staging directory `<dataDir>/staging/<table>` and its Lance table.
 */

/** A definition whose table is a template or a route names its tables from the records (docs/routing.md). */
export function routesTables(consumer: ResolvedConsumer): boolean {
  return consumer.tableRouting.kind !== 'fixed';
}

/**
 * The definition's tables, sorted: its staging directories in this data directory, its
 * fixed table, and — when it routes — the tables of its Lance database whose names its
 * template could produce (another replica's data directory may hold tables this one
 * never staged). Never every table of the database: other definitions may share it.
 */
export async function definitionTables(consumer: ResolvedConsumer): Promise<string[]> {
  const names = new Set<string>(await stagingTables(consumer.dataDir));
  if (!routesTables(consumer)) names.add(consumer.table);
  else {
    const produces = templateMatcher(consumer.table);
    for (const t of await lanceTables(consumer)) if (produces.test(t)) names.add(t);
  }
  return [...names].sort();
}

/** Names a table template could produce: its text as it is, each `{...}` any non-empty text. */
export function templateMatcher(template: string): RegExp {
  const literal = template.split(/\{[^}]*\}/).map((piece) => piece.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${literal.join('.+')}$`);
}

/** Directories under `<dataDir>/staging`: one per table this data directory staged. */
export async function stagingTables(dataDir: string): Promise<string[]> {
  const entries = await fsp.readdir(path.join(dataDir, 'staging'), { withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isDirectory() && !e.name.startsWith('.')).map((e) => e.name);
}

/** Tables of the definition's Lance database; none when its local directory does not exist (reading never creates it). */
async function lanceTables(consumer: ResolvedConsumer): Promise<string[]> {
  const uri = lanceUriOf(consumer);
  if (!uri.includes('://') && !existsSync(uri)) return [];
  const db = await lancedb.connect(uri, {
    ...(consumer.lance.storageOptions ? { storageOptions: { ...consumer.lance.storageOptions } } : {}),
  });
  try {
    return await db.tableNames();
  } finally {
    db.close();
  }
}

/** One table's lag and freshness, as `inspect` lists them. */
export interface TableSummary {
  readonly table: string;
  /** Whether its Lance table exists (committed). */
  readonly exists: boolean;
  readonly rows?: number;
  readonly version?: number;
  /** When its newest version was committed (its last publication, or a compaction after it). */
  readonly lastCommitAt?: string;
  /** Sealed parts waiting in its staging directory, their bytes, and the rows of plans not yet published. */
  readonly waitingParts: number;
  readonly waitingBytes: number;
  readonly plannedRows: number;
  readonly openParts: number;
  readonly quarantinedFiles: number;
}

/** Each of the definition's tables: its Lance table's size and last commit, what waits in its staging. */
export async function tableSummaries(consumer: ResolvedConsumer): Promise<TableSummary[]> {
  const tables = await definitionTables(consumer);
  const uri = lanceUriOf(consumer);
  const db =
    uri.includes('://') || existsSync(uri)
      ? await lancedb.connect(uri, {
          readConsistencyInterval: 0,
          ...(consumer.lance.storageOptions ? { storageOptions: { ...consumer.lance.storageOptions } } : {}),
        })
      : undefined;
  try {
    const out: TableSummary[] = [];
    for (const table of tables) {
      const dir = path.join(consumer.dataDir, 'staging', table);
      const staged = await stagedFiles(dir);
      const plannedRows = (await ledger.list(dir))
        .filter((e) => !e.published)
        .reduce((n, e) => n + (e.plan?.rows ?? 0), 0);
      const t = db ? await openTableIfCommitted(db, table) : undefined;
      let lance: Pick<TableSummary, 'rows' | 'version' | 'lastCommitAt'> = {};
      if (t) {
        try {
          const versions = await t.listVersions();
          const newest = versions.reduce((a, v) => (v.version > a.version ? v : a), versions[0]!);
          lance = {
            rows: await t.countRows(),
            version: newest.version,
            lastCommitAt: newest.timestamp.toISOString(),
          };
        } finally {
          t.close();
        }
      }
      out.push({ table, exists: t !== undefined, ...lance, plannedRows, ...staged });
    }
    return out;
  } finally {
    db?.close();
  }
}

async function stagedFiles(
  dir: string,
): Promise<Pick<TableSummary, 'waitingParts' | 'waitingBytes' | 'openParts' | 'quarantinedFiles'>> {
  let waitingParts = 0;
  let waitingBytes = 0;
  let openParts = 0;
  for (const name of await fsp.readdir(dir).catch(() => [] as string[])) {
    const part = parsePartName(name);
    if (!part) continue;
    if (part.state === 'open') openParts++;
    else {
      waitingParts++;
      waitingBytes += await fsp.stat(path.join(dir, name)).then(
        (s) => s.size,
        () => 0,
      );
    }
  }
  const quarantinedFiles = (await fsp.readdir(path.join(dir, QUARANTINE_DIR)).catch(() => [])).length;
  return { waitingParts, waitingBytes, openParts, quarantinedFiles };
}
