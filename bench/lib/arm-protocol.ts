/**
 * What an arm's child process prints on stdout, one JSON object per line: `start`
 * when its timed work begins (group joined, or data prepared), `first` with the
 * process's own CPU seconds just before its first record, `progress` as rows get
 * done, `done` with its own count of the rows it handled (verified against the
 * expected count by the orchestrator) and its CPU seconds at its last row. The CPU an
 * arm is charged is done's minus first's: the process's own accounting (every thread),
 * from its first record to its last row, as for every arm (interpreter start, imports
 * and the final check excluded).
 */
export type ArmEvent =
  | { readonly event: 'start' }
  | { readonly event: 'first'; readonly cpuSeconds: number }
  | { readonly event: 'progress'; readonly rows: number; readonly bytes: number }
  | {
      readonly event: 'done';
      readonly rows: number;
      readonly bytes: number;
      /** Rows the arm counted in its output (a Lance table), when it writes one. */
      readonly verifiedRows?: number;
      /** CPU seconds of the whole process (all threads) when its last row was done. */
      readonly cpuSeconds?: number;
      readonly detail?: Record<string, number | string>;
    };

export function emit(e: ArmEvent): void {
  process.stdout.write(`${JSON.stringify(e)}\n`);
}

/** This process's CPU seconds so far, every thread (user + system). */
export function processCpuSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/** Emits `first` once, before the arm's first record. */
export class FirstRecord {
  #seen = false;

  mark(): void {
    if (this.#seen) return;
    this.#seen = true;
    emit({ event: 'first', cpuSeconds: processCpuSeconds() });
  }
}

/** Emits `progress` at most every `ms` while work runs. */
export class ProgressTicker {
  rows = 0;
  bytes = 0;
  readonly #timer: NodeJS.Timeout;

  constructor(ms = 250) {
    this.#timer = setInterval(() => emit({ event: 'progress', rows: this.rows, bytes: this.bytes }), ms);
  }

  stop(): void {
    clearInterval(this.#timer);
    emit({ event: 'progress', rows: this.rows, bytes: this.bytes });
  }
}

/** `--name value` arguments of an arm. */
export function armArgs(argv: readonly string[] = process.argv.slice(2)): Map<string, string> {
  const args = new Map<string, string>();
  for (let i = 0; i + 1 < argv.length; i += 2) args.set(argv[i]!.replace(/^--/, ''), argv[i + 1]!);
  return args;
}
