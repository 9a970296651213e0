/**
 * Memory settings of a replica process that only take effect at process start
 * (DESIGN.md, "Memory budget"): glibc malloc tunables, and the main thread's V8 young
 * generation. `bin/kafka-lance` sets the same values before it execs node (keep both
 * in step); a parent that spawns `node bin/kafka-lance` passes `withMallocTuning(env)`.
 * A value already in the environment wins.
 *
 * - MALLOC_MMAP_THRESHOLD_ fixed at 8 MiB: allocations of 8 MiB and more (fetch
 *   responses, packed batches, Arrow columns, part reads, LanceDB's IPC copy) are
 *   mmapped and given back to the kernel when freed. glibc's default threshold moves
 *   up to 32 MiB after such a block is freed, and blocks below it stay in the arena.
 * - MALLOC_ARENA_MAX=2: fewer per-thread arenas (four JS threads + LanceDB's tokio
 *   threads), each holding its own freed memory.
 *
 * Measured on a 1M-record backlog (bench/perf-probe.ts, 2 cores, quiet machine): no
 * tuning 997 MiB peak at 58 MiB/s; threshold 8 MiB 763 MiB at 54.5 MiB/s; threshold
 * 1 MiB 637 MiB at 42 MiB/s (CPU +37 %: page faults of fresh mappings for every
 * mid-sized buffer). 8 MiB is the default: most of the memory for little of the speed.
 * A deployment that must stay lower sets MALLOC_MMAP_THRESHOLD_=1048576 itself.
 */
export const MALLOC_TUNING: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_MMAP_THRESHOLD_: '8388608',
};

/**
 * The main thread's semi-spaces at 4 MiB (a young generation of ~12 MiB, as the worker
 * threads get from WORKER_RESOURCE_LIMITS). Node 24's default lets them grow to 64 MiB
 * each (new space 128 MiB), which the main thread's short-lived kafkajs objects and fetch
 * buffers fill; 4 MiB cut peak RSS by ~50 MiB at the same CPU per GiB
 * (bench/hot-path-levers.md). Given first in NODE_OPTIONS: a later value there wins.
 */
export const MAIN_THREAD_V8_FLAGS = '--max-semi-space-size=4';

export function withMallocTuning(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const nodeOptions = env.NODE_OPTIONS ? `${MAIN_THREAD_V8_FLAGS} ${env.NODE_OPTIONS}` : MAIN_THREAD_V8_FLAGS;
  return { ...MALLOC_TUNING, ...env, NODE_OPTIONS: nodeOptions };
}
