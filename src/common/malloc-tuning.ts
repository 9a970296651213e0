/**
 * glibc malloc tunables for a replica process (DESIGN.md, "Memory budget"). glibc reads
 * them only at process start: `bin/kafka-lance` sets the same values before it execs
 * node (keep both in step); a parent that spawns `node bin/kafka-lance` passes
 * `withMallocTuning(env)`. A value already in the environment wins.
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

export function withMallocTuning(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return { ...MALLOC_TUNING, ...env };
}
