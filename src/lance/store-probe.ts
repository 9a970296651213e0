import * as lancedb from '@lancedb/lancedb';
import { ulid } from 'ulid';
import { KafkaLanceError, errorMessage } from '../common/errors';
import { checkoutNewestFrom } from './newest-by-number';

/**
 * Does the store under a Lance database commit concurrent appends atomically?
 *
 * Lance commits a version by writing its manifest with put-if-absent. A store that
 * ignores the condition (s3proxy 2.6.0, S3 API servers without conditional writes)
 * lets two writers of the same version both "succeed": one commit silently replaces
 * the other and its rows vanish, while every `add()` resolves. Several replicas that
 * append to one table on such a store lose publications they have already reported.
 * This probe asks the store directly, on a scratch table next to the real ones.
 */
export interface StoreProbeOptions {
  /** The database URI the tables live under: a local directory or s3://bucket/prefix. */
  readonly uri: string;
  readonly storageOptions?: Readonly<Record<string, string>>;
  /** Writers that append at the same moment, each from its own connection (default 4). */
  readonly concurrency?: number;
  /** Rows per writer and in the common create (default 200). */
  readonly rowsPerWriter?: number;
  /**
   * Rounds of concurrent appends, each on a new scratch table (default 3). A loss in
   * one round is conclusive and ends the probe; a round without loss may have been
   * luck (the writers did not collide), so the next round tries again. Measured on
   * s3proxy: 4 writers lost rows in 10 of 10 single rounds, 2 writers in 8 of 10.
   */
  readonly rounds?: number;
}

export interface StoreProbeRound {
  /** Rows of the create plus rows of every `add()` that resolved. */
  readonly expectedRows: number;
  /**
   * Of those, the rows a fresh connection finds after all writers have returned, each
   * writer's up to its own count (a rejected add that committed anyway cannot make up
   * for another writer's lost one).
   */
  readonly foundRows: number;
  /** Writers whose `add()` rejected (their rows are not expected; nothing is retried). */
  readonly rejectedAdds: number;
  /** Their error messages, for the log of whoever ran the probe. */
  readonly rejections: readonly string[];
  readonly elapsedMs: number;
}

export interface StoreProbeVerdict {
  /**
   * False as soon as one round counts fewer rows than its resolved adds wrote; true
   * only after `rounds` rounds, each with at least two resolved adds, lost nothing.
   */
  readonly atomic: boolean;
  /** Sums over the rounds run. */
  readonly expectedRows: number;
  readonly foundRows: number;
  readonly elapsedMs: number;
  readonly rounds: readonly StoreProbeRound[];
}

export type StoreProbeStep = 'connect' | 'create' | 'open' | 'append' | 'count' | 'drop';

/**
 * The probe could not reach a verdict (an operation failed, or too many adds were
 * rejected to test concurrent commits) or could not drop a scratch table.
 */
export class StoreProbeError extends KafkaLanceError {
  constructor(
    readonly step: StoreProbeStep,
    readonly table: string,
    uri: string,
    storageOptions: Readonly<Record<string, string>> | undefined,
    cause: unknown,
    extra: Readonly<Record<string, unknown>> = {},
  ) {
    super('LANCE_WRITE_FAILED', `store probe: ${step} of scratch table ${table} under ${uri} failed`, {
      cause,
      retriable: true,
      // Option names only: their values hold credentials.
      context: { step, table, uri, storageOptionKeys: Object.keys(storageOptions ?? {}), ...extra },
    });
  }
}

export const PROBE_TABLE_PREFIX = '_kafka_lance_probe_';
/** Fresh counts of a round at most (see probeRound). */
const COUNT_READS = 3;

export async function probeCommitAtomicity(options: StoreProbeOptions): Promise<StoreProbeVerdict> {
  const concurrency = options.concurrency ?? 4;
  const rowsPerWriter = options.rowsPerWriter ?? 200;
  const roundLimit = options.rounds ?? 3;
  if (!Number.isInteger(concurrency) || concurrency < 2)
    throw new RangeError('concurrency must be an integer >= 2');
  if (!Number.isInteger(rowsPerWriter) || rowsPerWriter < 1)
    throw new RangeError('rowsPerWriter must be >= 1');
  if (!Number.isInteger(roundLimit) || roundLimit < 1) throw new RangeError('rounds must be >= 1');

  const started = performance.now();
  const rounds: StoreProbeRound[] = [];
  let conclusive = 0;
  // A round where fewer than two adds resolved tested no concurrent commit: it counts
  // neither way, and is run again (within a cap, should the store keep failing adds).
  while (conclusive < roundLimit && rounds.length < roundLimit * 3) {
    const round = await probeRound(options, concurrency, rowsPerWriter);
    rounds.push(round);
    if (round.foundRows < round.expectedRows) break;
    if (concurrency - round.rejectedAdds >= 2) conclusive++;
  }
  const verdict: StoreProbeVerdict = {
    atomic: rounds.every((r) => r.foundRows >= r.expectedRows),
    expectedRows: rounds.reduce((n, r) => n + r.expectedRows, 0),
    foundRows: rounds.reduce((n, r) => n + r.foundRows, 0),
    elapsedMs: Math.round(performance.now() - started),
    rounds,
  };
  if (verdict.atomic && conclusive < roundLimit) {
    throw new StoreProbeError(
      'append',
      `${PROBE_TABLE_PREFIX}*`,
      options.uri,
      options.storageOptions,
      undefined,
      {
        reason: `only ${conclusive} of ${rounds.length} rounds had two or more adds succeed`,
        rejections: rounds.flatMap((r) => r.rejections).slice(0, 5),
      },
    );
  }
  return verdict;
}

async function probeRound(
  options: StoreProbeOptions,
  concurrency: number,
  rowsPerWriter: number,
): Promise<StoreProbeRound> {
  const { uri, storageOptions } = options;
  const table = `${PROBE_TABLE_PREFIX}${ulid()}`;
  const fail = (step: StoreProbeStep, cause: unknown, extra?: Record<string, unknown>): StoreProbeError =>
    new StoreProbeError(step, table, uri, storageOptions, cause, extra);
  const connect = async (): Promise<lancedb.Connection> => {
    try {
      return await lancedb.connect(uri, {
        readConsistencyInterval: 0,
        ...(storageOptions ? { storageOptions: { ...storageOptions } } : {}),
      });
    } catch (error) {
      throw fail('connect', error);
    }
  };

  const started = performance.now();
  const admin = await connect();
  const writers: lancedb.Connection[] = [];
  let created = false;
  let outcome: StoreProbeRound | undefined;
  let dropError: unknown;
  try {
    try {
      (await admin.createTable(table, rows(-1, rowsPerWriter), { mode: 'create' })).close();
      created = true;
    } catch (error) {
      throw fail('create', error);
    }
    // Every writer opens the same version before any of them commits: all of them
    // then commit the next version at once, which only put-if-absent can serialize.
    const handles: lancedb.Table[] = [];
    for (let w = 0; w < concurrency; w++) writers.push(await connect());
    try {
      for (const db of writers) handles.push(await db.openTable(table));
    } catch (error) {
      throw fail('open', error);
    }
    const adds = await Promise.allSettled(
      handles.map((t, w) => t.add(rows(w, rowsPerWriter), { mode: 'append' })),
    );
    const rejections = adds.flatMap((a) => (a.status === 'rejected' ? [errorMessage(a.reason)] : []));
    for (const t of handles) t.close();
    // Per writer, not in total: a rejected add may still have committed (LanceDB reloads
    // after its commit and can fail there), and its rows must not make up for another
    // writer's lost commit. The seed rows and every fulfilled writer's rows must all be there.
    const expected = [-1, ...adds.flatMap((a, w) => (a.status === 'fulfilled' ? [w] : []))];
    const expectedRows = rowsPerWriter * expected.length;
    // The newest version is read by number (a LIST of `_versions/` can come back short
    // and show an older version: newest-by-number.ts); a LIST that shows none at all
    // ("Not found") fails the open, which is read again on a new connection.
    let foundRows = -1;
    let countError: unknown;
    for (let read = 0; read < COUNT_READS && foundRows < expectedRows; read++) {
      if (read > 0) await new Promise((r) => setTimeout(r, 200 * read));
      const reader = await connect();
      try {
        const fresh = await reader.openTable(table);
        try {
          await checkoutNewestFrom(fresh, 1);
          foundRows = Math.max(foundRows, rowsKept(expected, await rowsByWriter(fresh), rowsPerWriter));
        } finally {
          fresh.close();
        }
      } catch (error) {
        countError = error;
      } finally {
        reader.close();
      }
    }
    if (foundRows < 0) throw fail('count', countError);
    outcome = {
      expectedRows,
      foundRows,
      rejectedAdds: rejections.length,
      rejections,
      elapsedMs: Math.round(performance.now() - started),
    };
  } finally {
    for (const db of writers) db.close();
    // Always: also after a failed create, which may have left files behind.
    dropError = await admin.dropTable(table).then(
      () => undefined,
      (error: unknown) => error ?? new Error('dropTable rejected'),
    );
    admin.close();
  }
  // A failure already on its way out (above) matters more than a leftover scratch table.
  if (created && dropError !== undefined) throw fail('drop', dropError, { round: outcome });
  return outcome;
}

/**
 * The rows of the `expected` writers found, each writer's up to `rowsPerWriter`: equal to
 * `rowsPerWriter × expected.length` only when every expected writer's rows are all there,
 * whatever other writers (a rejected add that committed anyway) left besides.
 */
export function rowsKept(
  expected: readonly number[],
  byWriter: ReadonlyMap<number, number>,
  rowsPerWriter: number,
): number {
  return expected.reduce((n, w) => n + Math.min(rowsPerWriter, byWriter.get(w) ?? 0), 0);
}

async function rowsByWriter(table: lancedb.Table): Promise<Map<number, number>> {
  const counts = new Map<number, number>();
  for (const r of (await table.query().select(['writer']).toArray()) as { writer: number }[])
    counts.set(Number(r.writer), (counts.get(Number(r.writer)) ?? 0) + 1);
  return counts;
}

function rows(writer: number, count: number): Record<string, unknown>[] {
  return Array.from({ length: count }, (_, n) => ({ writer, n }));
}
