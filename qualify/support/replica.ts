import { ReplicaProcess, type Exit, type LogLine } from '../../src/harness/replica-process';

/** One JSON log line of a replica, reduced to what the campaign reads. */
export interface ReplicaEvent {
  /** Milliseconds since the epoch (pino's `time`). */
  readonly time: number;
  readonly event: string;
  readonly level: number;
  readonly line: LogLine;
}

export type { Exit };

/**
 * One run of a replica (the harness's ReplicaProcess at debug level) as the campaign
 * sees it: its output goes to a log file (appended: every run of a data dir in one file)
 * and its JSON events are kept so that the campaign can wait for them (kill it during a
 * publication, a recovery, a group join) and say afterwards what a kill interrupted.
 */
export class ReplicaRun {
  /** SIGKILLs every replica still running (the runner's SIGINT and failure path). */
  static killAll(): void {
    void ReplicaProcess.killAll();
  }

  readonly events: ReplicaEvent[] = [];
  readonly process: ReplicaProcess;
  readonly #eventOf = new WeakMap<LogLine, ReplicaEvent>();

  constructor(
    readonly label: string,
    readonly dataDir: string,
    definitionFile: string,
    brokers: readonly string[],
    logFile: string,
    env: NodeJS.ProcessEnv = {},
  ) {
    this.process = new ReplicaProcess(definitionFile, dataDir, brokers, env, {
      // debug: `staging.sealed` marks a publication about to start (the kill targeting reads it).
      logLevel: 'debug',
      logFile,
      onLine: (line) => {
        if (typeof line.event !== 'string') return;
        const e: ReplicaEvent = {
          time: Number(line.time ?? Date.now()),
          event: line.event,
          level: Number(line.level ?? 30),
          line,
        };
        this.#eventOf.set(line, e);
        this.events.push(e);
      },
    });
  }

  get pid(): number {
    return this.process.pid;
  }

  get startedAt(): number {
    return this.process.startedAt;
  }

  get exited(): Promise<Exit> {
    return this.process.exited;
  }

  get alive(): boolean {
    return this.process.alive;
  }

  /** The next event (from now on) that passes `test`; undefined when the time is up or the process ended. */
  async next(test: (e: ReplicaEvent) => boolean, timeoutMs: number): Promise<ReplicaEvent | undefined> {
    const line = await this.process.next((l) => {
      const e = this.#eventOf.get(l);
      return e !== undefined && test(e);
    }, timeoutMs);
    return line && this.#eventOf.get(line);
  }

  /** The first event (already seen or still to come) named `event`. */
  seen(event: string, timeoutMs: number): Promise<ReplicaEvent | undefined> {
    const already = this.events.find((e) => e.event === event);
    return already ? Promise.resolve(already) : this.next((e) => e.event === event, timeoutMs);
  }

  signal(signal: NodeJS.Signals): void {
    this.process.signal(signal);
  }

  kill(): Promise<Exit> {
    return this.process.kill('SIGKILL');
  }

  /** SIGTERM (flush, commit, finish the publication), SIGKILL after `timeoutMs`. */
  stop(timeoutMs = 90_000): Promise<Exit> {
    return this.process.stop(timeoutMs);
  }
}

/**
 * What the replica was doing when it was killed, from its own events since it started:
 * the step of recovery it had not finished, the group join it was waiting for, or the
 * publication of parts it had sealed (a `staging.sealed` after the last `publication`).
 */
export function interrupted(events: readonly ReplicaEvent[]): string {
  const has = (name: string) => events.some((e) => e.event === name);
  const lastIndex = (names: readonly string[]) => {
    for (let i = events.length - 1; i >= 0; i--) if (names.includes(events[i]!.event)) return i;
    return -1;
  };
  if (!has('staging.recovery')) return 'recovery (staging recovery not finished)';
  const resumed = lastIndex(['publication.resume']);
  if (resumed >= 0 && lastIndex(['publication.recovery', 'publication', 'publication.failed']) < resumed)
    return 'recovery (republishing an interrupted publication)';
  if (!has('kafka.join')) return 'group join (recovered, not yet in the group)';
  const sealed = lastIndex(['staging.sealed']);
  const published = lastIndex(['publication', 'publication.failed', 'publication.recovery']);
  if (sealed > published) return 'publication (parts sealed, their publication under way)';
  return 'ingestion (staging records between publications)';
}

/** The last few event names before a moment, for the kill log. */
export function lastEvents(events: readonly ReplicaEvent[], n = 4): string {
  return events
    .slice(-n)
    .map((e) => e.event)
    .join(' → ');
}
