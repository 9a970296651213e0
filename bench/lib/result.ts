/** What one arm measured (report.json keeps these as they are). */
export interface ArmResult {
  readonly id: string;
  readonly label: string;
  readonly expectedRows: number;
  /** Rows the arm handled by its own count. */
  readonly rows: number;
  /** Rows found in its output (a Lance table) at the end, when it writes one. */
  readonly verifiedRows: number | undefined;
  /** Empty when the arm did what it should; otherwise what went wrong (lost rows, duplicates, a stall, a crash). */
  readonly problems: string[];
  /** JSON bytes the rows came from. */
  readonly bytes: number;
  /** Timed seconds: from the arm's start (group joined, or data prepared) to its last row done. */
  readonly seconds: number;
  /** Seconds from spawning the arm's process to its last row done (startup, recovery and join included). */
  readonly wallSeconds: number;
  readonly mibPerSecond: number;
  readonly recordsPerSecond: number;
  readonly peakRssMiB: number;
  /**
   * CPU seconds charged to the arm: the process's own accounting (every thread) from its
   * first record to its last row, the same way for every arm (start-up, imports, group
   * join and the final check excluded).
   */
  readonly cpuSeconds: number;
  /** CPU seconds of the arm's whole process tree over its life (start-up and the final check included). */
  readonly processCpuSeconds?: number;
  /** Cores other processes (the broker, other users of this shared machine) kept busy while the arm ran. */
  readonly otherCores: number;
  /** CPU seconds per thread of the arm's root process (see proc-sampler.ts). */
  readonly threadCpuSeconds: Record<string, number>;
  /** Seconds since spawn: RSS (MiB) and rows done, every 250 ms. */
  readonly series: { t: number; rssMiB: number; rows: number; consumed?: number }[];
  /** Seconds since spawn at which the timed part started. */
  readonly startedAt: number;
  readonly detail: Record<string, number | string>;
  /** kafka-lance arms: wall-clock phases (seconds since spawn) and the stage breakdown from /metrics. */
  readonly phases?: Record<string, number>;
  readonly stages?: Record<string, number>;
}

export const MiB = 1024 * 1024;

export function round(n: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}
