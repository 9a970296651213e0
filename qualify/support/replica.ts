import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { BIN } from './paths';

/** One JSON log line of a replica, reduced to what the campaign reads. */
export interface ReplicaEvent {
  /** Milliseconds since the epoch (pino's `time`). */
  readonly time: number;
  readonly event: string;
  readonly level: number;
  readonly line: Record<string, unknown>;
}

export type Exit = { code: number | null; signal: NodeJS.Signals | null };

/**
 * One run of a replica (`bin/kafka-lance run`) as a child process: its output goes to a
 * log file (appended: every run of a data dir in one file) and its JSON events are kept
 * in memory so that the campaign can wait for them (kill it during a publication, a
 * recovery, a group join) and say afterwards what a kill interrupted.
 */
export class ReplicaRun {
  static readonly #live = new Set<ReplicaRun>();

  /** SIGKILLs every replica still running (the runner's SIGINT and failure path). */
  static killAll(): void {
    for (const r of ReplicaRun.#live) r.signal('SIGKILL');
  }

  readonly events: ReplicaEvent[] = [];
  readonly startedAt = Date.now();
  readonly exited: Promise<Exit>;
  stopped = false;
  readonly #child: ChildProcessByStdio<null, Readable, Readable>;
  readonly #log: WriteStream;
  readonly #waiters: { test: (e: ReplicaEvent) => boolean; resolve: (e: ReplicaEvent) => void }[] = [];

  constructor(
    readonly label: string,
    readonly dataDir: string,
    definitionFile: string,
    brokers: readonly string[],
    logFile: string,
    env: NodeJS.ProcessEnv = {},
  ) {
    this.#log = createWriteStream(logFile, { flags: 'a' });
    this.#child = spawn(
      process.execPath,
      [
        BIN,
        'run',
        '-c',
        definitionFile,
        '--data-dir',
        dataDir,
        '--brokers',
        brokers.join(','),
        // debug: `staging.sealed` marks a publication about to start (the kill targeting reads it).
        '--log-level',
        'debug',
        '--metrics-port',
        '0',
        '--metrics-host',
        '127.0.0.1',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } },
    );
    let buffered = '';
    this.#child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      this.#log.write(chunk);
      buffered += chunk;
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const text of lines) this.#take(text);
    });
    this.#child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      this.#log.write(chunk);
    });
    ReplicaRun.#live.add(this);
    this.exited = new Promise((resolve) =>
      this.#child.on('exit', (code, signal) => {
        ReplicaRun.#live.delete(this);
        this.stopped = true;
        this.#log.end();
        resolve({ code, signal });
      }),
    );
  }

  get pid(): number {
    return this.#child.pid!;
  }

  get alive(): boolean {
    return !this.stopped;
  }

  #take(text: string): void {
    if (!text.startsWith('{')) return;
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return;
    }
    if (typeof line.event !== 'string') return;
    const e: ReplicaEvent = {
      time: Number(line.time ?? Date.now()),
      event: line.event,
      level: Number(line.level ?? 30),
      line,
    };
    this.events.push(e);
    for (const w of [...this.#waiters]) {
      if (w.test(e)) {
        this.#waiters.splice(this.#waiters.indexOf(w), 1);
        w.resolve(e);
      }
    }
  }

  /** The next event (from now on) that passes `test`; undefined when the time is up or the process ended. */
  next(test: (e: ReplicaEvent) => boolean, timeoutMs: number): Promise<ReplicaEvent | undefined> {
    return new Promise((resolve) => {
      const waiter = {
        test,
        resolve: (e: ReplicaEvent | undefined) => {
          clearTimeout(timer);
          resolve(e);
        },
      };
      const timer = setTimeout(() => {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        resolve(undefined);
      }, timeoutMs);
      this.#waiters.push(waiter);
      void this.exited.then(() => waiter.resolve(undefined));
    });
  }

  /** The first event (already seen or still to come) named `event`. */
  seen(event: string, timeoutMs: number): Promise<ReplicaEvent | undefined> {
    const already = this.events.find((e) => e.event === event);
    return already ? Promise.resolve(already) : this.next((e) => e.event === event, timeoutMs);
  }

  signal(signal: NodeJS.Signals): void {
    if (this.stopped) return;
    // A stopped (zombie) process cannot act on SIGTERM: wake it first.
    if (signal === 'SIGTERM') this.#child.kill('SIGCONT');
    this.#child.kill(signal);
  }

  async kill(): Promise<Exit> {
    this.signal('SIGKILL');
    return this.exited;
  }

  /** SIGTERM (flush, commit, finish the publication), SIGKILL after `timeoutMs`. */
  async stop(timeoutMs = 90_000): Promise<Exit> {
    this.signal('SIGTERM');
    const timer = setTimeout(() => this.signal('SIGKILL'), timeoutMs);
    const exit = await this.exited;
    clearTimeout(timer);
    return exit;
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
