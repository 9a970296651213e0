import { isCommitConflict } from './lance-errors';

/**
 * `fn` again after a commit conflict, with backoff, up to `attempts` times; not once
 * `stopping` is aborted (a replica stopping does not wait for more attempts of
 * background work such as an index build).
 */
export async function retryConflicts<T>(
  fn: () => Promise<T>,
  attempts = 8,
  stopping?: AbortSignal,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    if (stopping?.aborted) throw new WorkStoppedError();
    try {
      return await fn();
    } catch (error) {
      if (!isCommitConflict(error) || attempt >= attempts || stopping?.aborted) throw error;
      await backoff(Math.min(2_000, 25 * 2 ** attempt) * (0.5 + Math.random()), stopping);
    }
  }
}

/** Background work asked to stop before an attempt began (not a failure of the store). */
export class WorkStoppedError extends Error {
  constructor() {
    super('stopped before the next attempt');
  }
}

/** Waits `ms`, or less when `stopping` aborts meanwhile. */
function backoff(ms: number, stopping: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      stopping?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    stopping?.addEventListener('abort', done, { once: true });
  });
}
