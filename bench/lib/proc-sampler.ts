/**
 * Samples an arm's process tree from /proc every 250 ms: resident memory (sum over the
 * tree), CPU seconds (utime + stime of every process), and CPU seconds per thread of
 * the arm's root process (/proc/<pid>/task/<tid>/stat). Node names every thread
 * "node", so threads that tagged themselves (bench/thread-tag.ts writes
 * <dir>/<tid> = name from inside each worker thread) get their tag; the rest are
 * grouped by their kernel name (comm).
 */
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { withMallocTuning } from '../../src/common/malloc-tuning';

/**
 * The environment of a replica whose threads tag themselves into `tagDir` (thread-tag.js
 * preloaded), with the malloc and V8 tuning `bin/kafka-lance` run as a program sets
 * (glibc and V8 read them only at start).
 */
export function threadTaggedEnv(tagDir: string): NodeJS.ProcessEnv {
  const tuned = withMallocTuning(process.env);
  return {
    ...tuned,
    NODE_OPTIONS: `${tuned.NODE_OPTIONS ?? ''} --require ${path.join(__dirname, '../thread-tag.js')}`,
    BENCH_THREAD_DIR: tagDir,
  };
}

const CLOCK_TICKS = 100; // USER_HZ on Linux
const PAGE = 4096;

export interface Sample {
  /** Seconds since the sampler started. */
  readonly t: number;
  readonly rssBytes: number;
  readonly cpuSeconds: number;
  /** Rows the arm reports done at this time (visible in Lance, consumed, decoded...). */
  readonly rows: number;
  /** kafka-lance arms: rows consumed from Kafka and handed to staging by then. */
  readonly consumed?: number;
}

interface Stat {
  readonly pid: number;
  readonly ppid: number;
  readonly comm: string;
  readonly cpuSeconds: number;
}

async function readStat(file: string): Promise<Stat | undefined> {
  const text = await fsp.readFile(file, 'utf8').catch(() => undefined);
  if (!text) return undefined;
  const close = text.lastIndexOf(')');
  const fields = text.slice(close + 2).split(' ');
  // fields[0] is the state (field 3 of stat): ppid is 4, utime 14, stime 15.
  return {
    pid: Number(text.slice(0, text.indexOf(' '))),
    comm: text.slice(text.indexOf('(') + 1, close),
    ppid: Number(fields[1]),
    cpuSeconds: (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS,
  };
}

async function rssOf(pid: number): Promise<number> {
  const text = await fsp.readFile(`/proc/${pid}/statm`, 'utf8').catch(() => '');
  return Number(text.split(' ')[1] ?? 0) * PAGE;
}

/** Busy and total CPU seconds of the whole machine (all cores) from /proc/stat. */
async function machineCpu(): Promise<{ busy: number; total: number }> {
  const line = (await fsp.readFile('/proc/stat', 'utf8')).split('\n')[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const total = v.reduce((a, b) => a + b, 0);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  return { busy: (total - idle) / CLOCK_TICKS, total: total / CLOCK_TICKS };
}

export class ProcessTreeSampler {
  readonly samples: Sample[] = [];
  /** Set by the arm runner as progress arrives. */
  rows = 0;
  consumed: number | undefined;
  peakRssBytes = 0;
  readonly #root: number;
  readonly #tagDir: string | undefined;
  readonly #t0 = performance.now();
  /** Last CPU seconds seen per process and per thread (a process that exits keeps its last figure). */
  readonly #processCpu = new Map<number, number>();
  readonly #threadCpu = new Map<number, { comm: string; cpu: number }>();
  #timer: NodeJS.Timeout | undefined;
  #busy = false;

  constructor(root: number, tagDir?: string) {
    this.#root = root;
    this.#tagDir = tagDir;
  }

  #machineAtStart: Promise<{ busy: number; total: number }> = machineCpu();

  /**
   * Cores other processes kept busy while the arm ran (the Kafka broker included, and
   * anything else on this shared machine): machine busy CPU minus the arm's, per second.
   */
  async otherCores(): Promise<number> {
    const [a, b] = [await this.#machineAtStart, await machineCpu()];
    const seconds = this.elapsed();
    return seconds > 0 ? Math.max(0, b.busy - a.busy - this.cpuSeconds()) / seconds : 0;
  }

  start(intervalMs = 250): this {
    this.#timer = setInterval(() => void this.sampleOnce(), intervalMs);
    return this;
  }

  elapsed(): number {
    return (performance.now() - this.#t0) / 1000;
  }

  async sampleOnce(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      const tree = await this.#tree();
      let rss = 0;
      for (const s of tree) {
        this.#processCpu.set(s.pid, s.cpuSeconds);
        rss += await rssOf(s.pid);
      }
      const tids = await fsp.readdir(`/proc/${this.#root}/task`).catch(() => [] as string[]);
      for (const tid of tids) {
        const s = await readStat(`/proc/${this.#root}/task/${tid}/stat`);
        if (s) this.#threadCpu.set(Number(tid), { comm: s.comm, cpu: s.cpuSeconds });
      }
      if (tree.length === 0) return;
      this.peakRssBytes = Math.max(this.peakRssBytes, rss);
      this.samples.push({
        t: this.elapsed(),
        rssBytes: rss,
        cpuSeconds: this.cpuSeconds(),
        rows: this.rows,
        ...(this.consumed !== undefined ? { consumed: this.consumed } : {}),
      });
    } finally {
      this.#busy = false;
    }
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
  }

  /** CPU seconds of every process of the tree seen so far. */
  cpuSeconds(): number {
    let n = 0;
    for (const v of this.#processCpu.values()) n += v;
    return n;
  }

  /** CPU seconds per thread of the root process, by tag (or "main") or kernel name. */
  async threadCpu(): Promise<Record<string, number>> {
    const tags = new Map<number, string>();
    if (this.#tagDir) {
      for (const f of await fsp.readdir(this.#tagDir).catch(() => [] as string[])) {
        tags.set(Number(f), (await fsp.readFile(path.join(this.#tagDir, f), 'utf8')).trim());
      }
    }
    const out: Record<string, number> = {};
    for (const [tid, { comm, cpu }] of this.#threadCpu) {
      const name = tid === this.#root ? 'main' : (tags.get(tid) ?? `other: ${comm}`);
      out[name] = (out[name] ?? 0) + cpu;
    }
    return out;
  }

  async #tree(): Promise<Stat[]> {
    const entries = await fsp.readdir('/proc');
    const stats: Stat[] = [];
    for (const e of entries) {
      if (!/^\d+$/.test(e)) continue;
      const s = await readStat(`/proc/${e}/stat`);
      if (s) stats.push(s);
    }
    const inTree = new Set<number>([this.#root]);
    // Parents precede children in pid order most of the time; loop until stable.
    for (let changed = true; changed;) {
      changed = false;
      for (const s of stats) {
        if (!inTree.has(s.pid) && inTree.has(s.ppid)) {
          inTree.add(s.pid);
          changed = true;
        }
      }
    }
    return stats.filter((s) => inTree.has(s.pid));
  }
}
