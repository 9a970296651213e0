/**
 * Rejects with `message` when `work` takes longer than `ms`; the work itself goes on, its
 * result unused. For calls that must not hold what waits on them (a fetch, a start, a stop).
 */
export function withTimeout<T>(work: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
