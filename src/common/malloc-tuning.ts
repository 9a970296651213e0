/**
 * glibc malloc tunables for a replica process (DESIGN.md, "Memory budget"). glibc reads
 * them only at process start: `bin/kafka-lance` sets the same values before it execs
 * node (keep both in step); a parent that spawns `node bin/kafka-lance` passes
 * `withMallocTuning(env)`. A value already in the environment wins.
 *
 * - MALLOC_MMAP_THRESHOLD_ fixed at 1 MiB: allocations of 1 MiB and more (ArrayBuffers
 *   of fetches, packed batches, Arrow columns, part reads, LanceDB's IPC copy) are
 *   mmapped and given back to the kernel when freed. glibc's default threshold moves
 *   up to 32 MiB after such a block is freed, and blocks below it stay in the arena.
 * - MALLOC_ARENA_MAX=2: fewer per-thread arenas (four JS threads + LanceDB's tokio
 *   threads), each holding its own freed memory.
 *
 * Measured on a 1M-record backlog (bench/perf-probe.ts, 2 cores): peak RSS 894 →
 * 565–633 MiB, CPU +10–20 % (page faults of fresh mappings).
 */
export const MALLOC_TUNING: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_MMAP_THRESHOLD_: '1048576',
};

export function withMallocTuning(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return { ...MALLOC_TUNING, ...env };
}
