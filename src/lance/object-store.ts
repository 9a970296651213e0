import * as lancedb from '@lancedb/lancedb';
import { classifyStoreError, type StoreProblem } from './lance-errors';

/**
 * One bounded round trip to a Lance database's object store at start so that a
 * wrong endpoint, wrong credentials or a missing bucket stop the replica within
 * seconds with a message naming the cause, instead of surfacing as publications
 * that LanceDB retries for minutes (its default retry budget is 180 s per request).
 */

export interface StoreCheckResult {
  readonly ok: boolean;
  readonly problem?: StoreProblem;
  /** A sentence naming the problem and the setting to fix (no secret values). */
  readonly message?: string;
  readonly elapsedMs: number;
}

/**
 * Options that bound one attempt: no retries (a wrong setting does not get better
 * by waiting), object_store's connect and request timeouts. The user's own options
 * win for everything else.
 */
const BOUNDED: Readonly<Record<string, string>> = {
  client_max_retries: '0',
  client_retry_timeout: '3',
  connect_timeout: '3s',
  timeout: '5s',
};

/**
 * Connects and lists the database once (LanceDB's connect lists the prefix), bounded
 * by `timeoutMs` also on the JavaScript side should the native call hang. Local paths
 * are not checked (a missing directory is created on first publication).
 */
export async function checkStoreReachable(
  uri: string,
  storageOptions: Readonly<Record<string, string>> | undefined,
  timeoutMs = 10_000,
): Promise<StoreCheckResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  const attempt = (async (): Promise<unknown> => {
    const db = await lancedb.connect(uri, { storageOptions: { ...BOUNDED, ...(storageOptions ?? {}) } });
    try {
      await db.tableNames();
    } finally {
      db.close();
    }
    return undefined;
  })().catch((error: unknown) => error ?? new Error('connect rejected'));
  try {
    const outcome = await Promise.race([attempt, timeout]);
    if (outcome === undefined) return { ok: true, elapsedMs: elapsed() };
    if (outcome === 'timeout') {
      return {
        ok: false,
        problem: 'timeout',
        message: `no answer from the store of ${uri} within ${timeoutMs} ms: check lance.storageOptions.endpoint (or AWS_ENDPOINT_URL) and the network`,
        elapsedMs: elapsed(),
      };
    }
    return { ok: false, ...classifyStoreError(uri, outcome), elapsedMs: elapsed() };
  } finally {
    clearTimeout(timer);
  }
}
