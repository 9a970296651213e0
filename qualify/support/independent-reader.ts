import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, statSync } from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { QUALIFY_DIR } from './paths';

const run = promisify(execFile);

/**
 * The Lance format LanceDB for Node 0.39 writes is Lance 12.0.0 (the lance crates its
 * native module links); pylance 12.0.0 is the same Rust code behind Python, published
 * separately: it reads those tables without going through LanceDB at all.
 */
export const PYLANCE = 'pylance==12.0.0';
export const PYARROW = 'pyarrow==21.0.0';
export const VENV = path.join(QUALIFY_DIR, '.venv');
const PYTHON = path.join(VENV, 'bin/python');
const SCRIPT = path.join(QUALIFY_DIR, 'verify_table.py');

/** What qualify/verify_table.py reports about a dataset. */
export interface IndependentReading {
  readonly reader: string;
  readonly dataset: string;
  readonly version: number;
  readonly rows: number;
  readonly distinct: number;
  readonly duplicates: number;
  readonly duplicateExamples: readonly (readonly (string | number)[])[];
  readonly checksummed: boolean;
  readonly checksumMismatches: number;
  readonly mismatchExamples: readonly [string, number, number][];
  readonly partitions: Record<string, { rows: number; minOffset: number; maxOffset: number }>;
  /** With an expected-rows file: expected (partition, offset) pairs without a row. */
  readonly missing?: number;
  readonly missingExamples?: readonly [number | string, number][];
  /** With an expected-rows file: rows at an offset the file does not list. */
  readonly unexpected?: number;
  readonly unexpectedExamples?: readonly [number | string, number][];
}

/**
 * Creates qualify/.venv with the pinned pylance and pyarrow from PyPI unless it is
 * there already (the check imports both: a half-made venv from an interrupted install
 * is made again). Bounded by `timeoutMs` (a download of ~120 MB).
 */
export async function ensureIndependentReader(
  log: (line: string) => void,
  timeoutMs = 300_000,
): Promise<void> {
  const installed = async () =>
    existsSync(PYTHON) &&
    (await run(PYTHON, ['-c', 'import lance, pyarrow'], { timeout: 60_000 }).then(
      () => true,
      () => false,
    ));
  if (await installed()) return;
  // Test files in several jest workers (and qualify steps) reach this at once on a fresh
  // clone: one makes the venv while the others wait, or they clear each other's.
  await withInstallLock(`${VENV}.install-lock`, 'independent reader', timeoutMs, async () => {
    if (await installed()) return;
    const python = process.env.PYTHON ?? 'python3';
    log(`independent reader: creating ${VENV} with ${PYLANCE} ${PYARROW} (first run downloads ~120 MB)`);
    await run(python, ['-m', 'venv', '--clear', VENV], { timeout: 120_000 });
    await run(PYTHON, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', PYLANCE, PYARROW], {
      timeout: timeoutMs,
      maxBuffer: 16 * 1024 * 1024,
    });
  });
}

/**
 * Runs `install` while holding the lock directory `lock` (mkdir is atomic across processes):
 * the test suites and the qualification share a clone, and two installs into one venv clear
 * each other's. `who` names the venv in the error of a lock held too long.
 */
export async function withInstallLock(
  lock: string,
  who: string,
  timeoutMs: number,
  install: () => Promise<void>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      // A lock older than an install may take was left by a process that died in it.
      const age = Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > timeoutMs) rmSync(lock, { recursive: true, force: true });
      else if (Date.now() > deadline) throw new Error(`${who}: ${lock} held for ${timeoutMs} ms`);
      else await new Promise((r) => setTimeout(r, 1_000));
    }
  }
  try {
    await install();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/**
 * Reads a dataset (`<uri>/<table>.lance`) with pylance; `storageOptions` for s3://.
 * `expectedFile`: JSON `{ "<partition>": [offsets] }` of the rows the table must hold,
 * exactly (a log with gaps): the reading then counts the missing and unexpected ones.
 * `byTopicId`: rows keyed by incarnation too (a recreated topic), the expected file's keys
 * "<topic id>/<partition>".
 */
export async function readIndependently(
  dataset: string,
  storageOptions: Record<string, string> = {},
  topic?: string,
  expectedFile?: string,
  byTopicId = false,
): Promise<IndependentReading> {
  const args = [SCRIPT, '--dataset', dataset, '--storage-options', JSON.stringify(storageOptions)];
  if (topic) args.push('--topic', topic);
  if (expectedFile) args.push('--expected', expectedFile);
  if (byTopicId) args.push('--by-topic-id');
  // s3proxy's listing race (see test/support/faults.ts) can fail one read: try a few times.
  for (let attempt = 1; ; attempt++) {
    try {
      const { stdout } = await run(PYTHON, args, { timeout: 600_000, maxBuffer: 64 * 1024 * 1024 });
      return JSON.parse(stdout) as IndependentReading;
    } catch (error) {
      if (attempt >= 5) throw error;
      await new Promise((r) => setTimeout(r, 2_000));
    }
  }
}

/**
 * What pylance's reading says is wrong, as report lines: a row count other than
 * `expected`, expected rows absent, rows it did not expect (`unexpectedRows` says which),
 * duplicate keys (`keys`: "triples" or "4-tuples") and checksum mismatches.
 */
export function independentProblems(
  independent: IndependentReading,
  expected: number,
  unexpectedRows: string,
  keys: string,
): string[] {
  const problems: string[] = [];
  if (independent.rows !== expected) problems.push(`pylance: ${independent.rows} rows, expected ${expected}`);
  if ((independent.missing ?? 0) > 0)
    problems.push(
      `pylance: ${independent.missing} expected rows absent (${JSON.stringify(independent.missingExamples)})`,
    );
  if ((independent.unexpected ?? 0) > 0)
    problems.push(
      `pylance: ${independent.unexpected} ${unexpectedRows} (${JSON.stringify(independent.unexpectedExamples)})`,
    );
  if (independent.duplicates > 0)
    problems.push(
      `pylance: ${independent.duplicates} duplicate ${keys} (${JSON.stringify(independent.duplicateExamples)})`,
    );
  if (independent.checksumMismatches > 0)
    problems.push(
      `pylance: ${independent.checksumMismatches} checksum mismatches (${JSON.stringify(independent.mismatchExamples)})`,
    );
  return problems;
}

/** What pylance reads of an upsert table (verify_upsert_table.py): the live rows by key, and keys held twice. */
export interface UpsertReading {
  readonly version: number;
  readonly rows: readonly Record<string, unknown>[];
  readonly duplicated: readonly unknown[];
  /** Every row, the deletes kept as rows included. */
  readonly all_rows: number;
}

/** Reads an upsert table's live rows (`_deleted = false`) with pylance, sorted by `key`. */
export async function readUpsertTable(
  dataset: string,
  key: string,
  columns: readonly string[],
): Promise<UpsertReading> {
  const { stdout } = await run(
    PYTHON,
    [
      path.join(QUALIFY_DIR, 'verify_upsert_table.py'),
      '--dataset',
      dataset,
      '--key',
      key,
      '--columns',
      columns.join(','),
    ],
    { timeout: 600_000, maxBuffer: 256 * 1024 * 1024 },
  );
  return JSON.parse(stdout) as UpsertReading;
}

/** What qualify/verify_tables.py reports of one table of many. */
export interface TableReading {
  readonly dataset: string;
  readonly exists: boolean;
  readonly rows: number;
  /** Rows per `_topic`: a table routed from one topic holds that topic's rows only. */
  readonly byTopic: Readonly<Record<string, number>>;
  readonly duplicates: number;
  readonly duplicateExamples: readonly (readonly (string | number)[])[];
  readonly checksumMismatches: number;
}

/** Reads many datasets (`<uri>/<table>.lance`) with pylance in one process. */
export async function readTablesIndependently(
  datasets: readonly string[],
): Promise<{ reader: string; tables: TableReading[] }> {
  const { stdout } = await run(
    PYTHON,
    [path.join(QUALIFY_DIR, 'verify_tables.py'), '--datasets', JSON.stringify(datasets)],
    { timeout: 600_000, maxBuffer: 64 * 1024 * 1024 },
  );
  return JSON.parse(stdout) as { reader: string; tables: TableReading[] };
}
