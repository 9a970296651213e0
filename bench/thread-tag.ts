/**
 * Preloaded into the replica of the end-to-end arms (NODE_OPTIONS=--require): each
 * worker thread writes its kernel thread id and a name to $BENCH_THREAD_DIR, so the
 * bench can attribute /proc/<pid>/task/<tid> CPU to staging workers and the
 * materializer (Node 20 names every thread "node"). Reading /proc/thread-self from a
 * synchronous call runs on the calling thread, which is how a worker learns its tid.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { isMainThread, workerData } from 'node:worker_threads';

const dir = process.env.BENCH_THREAD_DIR;
if (dir && !isMainThread) {
  const tid = readFileSync('/proc/thread-self/stat', 'utf8').split(' ')[0]!;
  const data = workerData as { workerIndex?: number; mode?: string } | undefined;
  const name =
    data?.workerIndex !== undefined
      ? `staging worker ${data.workerIndex}`
      : data?.mode !== undefined
        ? 'materializer'
        : 'worker';
  writeFileSync(path.join(dir, tid), name);
}
