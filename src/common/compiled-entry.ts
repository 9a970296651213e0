import * as path from 'node:path';

/**
 * The path of a compiled module for `new Worker(...)`. Worker threads and child
 * processes do not go through jest's transform, so they always run the files that
 * `tsc -b` wrote to dist/ (jest compiles only what its own module registry loads). From dist this is a sibling file;
 * from src (under ts-jest) it is the same file's twin in dist/.
 */
export function compiledEntry(fromDir: string, file: string): string {
  const js = file.replace(/\.ts$/, '.js');
  const root = path.resolve(__dirname, '../..');
  if (path.basename(root) === 'dist') return path.join(fromDir, js);
  return path.join(root, 'dist', path.relative(root, fromDir), js);
}

/**
 * Resource limits for the replica's worker threads. A small young generation makes
 * V8 scavenge often, which is what frees the ArrayBuffers a worker drops (decoded
 * columns, packed batches, part bytes read for a publication): with V8's default
 * (16 MiB semi-spaces) they survived into the old generation and stayed allocated
 * until the next full GC, ~150 MiB per idle staging worker. Measured on the 1M-record
 * probe (bench/perf-probe.ts): worker heaps 50 → 24 MiB, peak RSS −120 MiB, no
 * measurable CPU change.
 */
export const WORKER_RESOURCE_LIMITS = { maxYoungGenerationSizeMb: 12 } as const;
