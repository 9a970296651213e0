/**
 * Where the main thread's garbage comes from: V8's sampling heap profiler, counting every
 * sampled allocation whether or not a collection later freed it (Node's own --heap-prof
 * keeps only what is still alive at the end, which says nothing about churn).
 *
 * Preloaded into a replica, it samples from its start and writes
 * `$BENCH_HEAP_SAMPLES/main-<pid>.json` when the process exits; run as a program on such a
 * file, it prints the allocation sites with the most bytes, and their callers:
 *
 *   BENCH_HEAP_SAMPLES=/tmp/hp node dist/bench/perf-probe.js --records 1000000 \
 *     --node-args "--require $PWD/dist/bench/heap-sampling.js"
 *   node dist/bench/heap-sampling.js /tmp/hp/main-*.json
 *
 * With BENCH_HEAP_PROMOTED=1 it leaves out what a young-generation collection freed: what
 * is left is what reached the old generation (or is still alive), the bytes that bring on
 * the full collections.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import * as path from 'node:path';
import { isMainThread } from 'node:worker_threads';

interface ProfileNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly selfSize: number;
  readonly children?: readonly ProfileNode[];
}

function startSampling(dir: string): void {
  const session = new Session();
  session.connect();
  session.post('HeapProfiler.enable');
  session.post('HeapProfiler.startSampling', {
    samplingInterval: 16_384,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: process.env.BENCH_HEAP_PROMOTED !== '1',
  });
  // An in-process session answers synchronously, so this completes inside the exit handler.
  process.once('exit', () =>
    session.post('HeapProfiler.stopSampling', (error, result) => {
      if (!error) writeFileSync(path.join(dir, `main-${process.pid}.json`), JSON.stringify(result.profile));
    }),
  );
}

const frameName = ({ callFrame: f }: ProfileNode): string =>
  `${f.functionName || '(anonymous)'} (${path.basename(f.url) || 'native'}:${f.lineNumber + 1})`;

function summarize(file: string): void {
  const head = (JSON.parse(readFileSync(file, 'utf8')) as { head: ProfileNode }).head;
  const bySite = new Map<string, number>();
  const byStack = new Map<string, number>();
  let total = 0;
  const walk = (node: ProfileNode, callers: readonly string[]): void => {
    const name = frameName(node);
    total += node.selfSize;
    if (node.selfSize > 0) {
      bySite.set(name, (bySite.get(name) ?? 0) + node.selfSize);
      const stack = [name, ...callers.slice(0, 3)].join(' < ');
      byStack.set(stack, (byStack.get(stack) ?? 0) + node.selfSize);
    }
    for (const child of node.children ?? []) walk(child, [name, ...callers]);
  };
  walk(head, []);
  const mb = (bytes: number) => (bytes / 1e6).toFixed(1).padStart(7);
  const top = (m: Map<string, number>, n: number) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n);
  console.log(`${mb(total)} MB sampled in all\n\nby allocation site:`);
  for (const [site, bytes] of top(bySite, 20))
    console.log(`${mb(bytes)} MB ${((100 * bytes) / total).toFixed(1).padStart(5)} %  ${site}`);
  console.log('\nby site and its three callers:');
  for (const [stack, bytes] of top(byStack, 15)) console.log(`${mb(bytes)} MB  ${stack}`);
}

if (require.main === module) {
  const file = process.argv[2];
  if (!file) throw new Error('usage: node dist/bench/heap-sampling.js <main-PID.json>');
  summarize(file);
} else if (isMainThread && process.env.BENCH_HEAP_SAMPLES) {
  startSampling(process.env.BENCH_HEAP_SAMPLES);
}
