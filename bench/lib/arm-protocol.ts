/**
 * What an arm's child process prints on stdout, one JSON object per line: `start`
 * when its timed work begins (group joined, or data prepared), `progress` as rows get
 * done, `done` with its own count of the rows it handled (verified against the
 * expected count by the orchestrator).
 */
export type ArmEvent =
  | { readonly event: 'start' }
  | { readonly event: 'progress'; readonly rows: number; readonly bytes: number }
  | {
      readonly event: 'done';
      readonly rows: number;
      readonly bytes: number;
      /** Rows the arm counted in its output (a Lance table), when it writes one. */
      readonly verifiedRows?: number;
      readonly detail?: Record<string, number | string>;
    };

export function emit(e: ArmEvent): void {
  process.stdout.write(`${JSON.stringify(e)}\n`);
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
