import { setFlagsFromString } from 'node:v8';
/**
 * Memory settings of a replica process that only take effect at process start
 * (DESIGN.md, "Memory budget"): glibc malloc tunables, and the main thread's V8 young
 * generation. `bin/kafka-lance` sets the same values before it execs node (keep both
 * in step); a parent that spawns `node bin/kafka-lance` passes `withMallocTuning(env)`.
 * A value already in the environment wins.
 *
 * - MALLOC_MMAP_THRESHOLD_ fixed at 2 MiB: allocations of 2 MiB and more (fetch
 *   responses, packed batches, Arrow columns, part reads, LanceDB's own buffers) are
 *   mmapped and given back to the kernel when freed. glibc's default threshold moves
 *   up to 32 MiB after such a block is freed, and blocks below it stay in the arena.
 * - MALLOC_ARENA_MAX=2: fewer per-thread arenas (the main thread, the staging and materializer workers, V8's
 *   helpers and LanceDB's tokio threads), each holding its own freed memory.
 *
 * Measured on the bench's 1M-record backlog (bench/hot-path-levers.md, section 12):
 * threshold 8 MiB 665–680 MiB peak, 2 MiB 532–607 MiB at the same CPU per GiB (the
 * arena's resident part 140–212 → ~47 MiB). Before the materializer reused its
 * publication buffer, 1 MiB cost +37 % CPU in page faults of fresh mappings; the
 * buffers above 2 MiB that remain are few and large. Without any tuning: 997 MiB.
 */
export const MALLOC_TUNING: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_MMAP_THRESHOLD_: '2097152',
};

/**
 * The main thread's semi-spaces at 4 MiB (a young generation of ~12 MiB, as the worker
 * threads get from WORKER_RESOURCE_LIMITS). Node 24's default lets them grow to 64 MiB
 * each (new space 128 MiB), which the main thread's short-lived kafkajs objects and fetch
 * buffers fill; 4 MiB cut peak RSS by ~50 MiB at the same CPU per GiB
 * (bench/hot-path-levers.md). Given first in NODE_OPTIONS: a later value there wins.
 */
export const MAIN_THREAD_V8_FLAGS = '--max-semi-space-size=4';

/**
 * For a routing consumer (`kafka-lance run` calls it): every V8 heap of the process grows to
 * 1.75× what its last full collection left (`--heap-growing-percent=75`), not V8's default of
 * up to 4×. Not for one table: there it cost ~20 % of the throughput and ~+4 CPU s/GiB on 1M
 * JSON logs (86 → 70 MiB/s, 18 → 22 CPU s/GiB, peak 438 → 395 MiB). With 200 routed tables the
 * main thread's heap reached ~200 MiB of which ~50 MiB was live (kafkajs's records and the
 * tables' pending batches outlive the small young generation, then die in the old one),
 * and the replica 550–610 MiB; at 2× its peak was 482–517 MiB over seven runs, at 1.75×
 * 472 MiB, for a few CPU s more of collection per GiB (bench/many-tables-levers.md). Set at
 * run time because Node refuses the flag in NODE_OPTIONS; V8 reads it at each collection, so
 * setting it once the definition is read still holds for the heaps already made.
 */
export function tuneHeapGrowth(env: NodeJS.ProcessEnv = process.env): void {
  // KAFKA_LANCE_HEAP_GROWING_PERCENT=off keeps V8's own growth (the bench compares both).
  const percent = env.KAFKA_LANCE_HEAP_GROWING_PERCENT ?? '75';
  if (percent === 'off') return;
  if (!/^[1-9][0-9]{0,2}$/.test(percent))
    throw new Error(
      `KAFKA_LANCE_HEAP_GROWING_PERCENT: ${percent} is not a percentage from 1 to 999 or 'off'`,
    );
  setFlagsFromString(`--heap-growing-percent=${percent}`);
}

export function withMallocTuning(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const nodeOptions = env.NODE_OPTIONS ? `${MAIN_THREAD_V8_FLAGS} ${env.NODE_OPTIONS}` : MAIN_THREAD_V8_FLAGS;
  return { ...MALLOC_TUNING, ...env, NODE_OPTIONS: nodeOptions };
}
