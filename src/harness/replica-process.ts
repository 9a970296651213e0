/**
 * The harness's replica: one `bin/kafka-lance run` as a child process, the way a user
 * starts it, for everything that drives replicas from outside — the demos, the tests,
 * the qualification campaign and the benchmarks. Spawning, the JSON log lines, the
 * waits for an event or for readiness, the metrics, SIGTERM and SIGKILL live here once.
 *
 * It lives under src/ (and ships with the package) because the demos are part of the
 * product (`kafka-lance demo`, `scale-demo`, `vector-demo`) and only src/ is compiled
 * into what a user installs; test/, qualify/ and bench/ import it from here.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, createWriteStream, openSync, type WriteStream } from 'node:fs';
import * as path from 'node:path';
import { ROOT } from '../common/repo-root';
import { scrape, type Sample } from './prometheus-text';

/** bin/kafka-lance of this checkout (or installed package). */
export const BIN = path.join(ROOT, 'bin/kafka-lance');

/** One JSON log line of the replica (or a line that was not JSON, as an error's `msg`). */
export interface LogLine {
  readonly level: number;
  readonly event?: string;
  /** Milliseconds since the epoch (pino's `time`). */
  readonly time?: number;
  readonly msg?: string;
  readonly [key: string]: unknown;
}

export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface ReplicaProcessOptions {
  /** `--log-level` (default: the CLI's own default). */
  readonly logLevel?: string;
  /** `--metrics-port` (default 0: any free port, so that several replicas run at once). */
  readonly metricsPort?: number;
  /** Node options before the entry point (a `--cpu-prof`, a `--require`). */
  readonly nodeArgs?: readonly string[];
  /**
   * Appends the replica's stdout and stderr to this file (every run of a data dir in one
   * file). With `parseLogs: false` the child writes it itself and nothing is read here.
   */
  readonly logFile?: string;
  /** Keep and parse the log lines (default true); waitFor and next need them. */
  readonly parseLogs?: boolean;
  /** Called with every log line as it arrives. */
  readonly onLine?: (line: LogLine) => void;
}

export type ReplicaProcessErrorCode = 'NOT_READY' | 'EXITED' | 'NO_SUCH_LINE' | 'LOGS_NOT_PARSED';

/** A wait on a replica process ended without what it waited for. */
export class ReplicaProcessError extends Error {
  constructor(
    readonly code: ReplicaProcessErrorCode,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

interface Waiter {
  readonly test: (line: LogLine) => boolean;
  readonly resolve: (line: LogLine | undefined) => void;
}

export class ReplicaProcess {
  static readonly #live = new Set<ReplicaProcess>();

  /** SIGKILLs every replica still running: a failed test or an interrupted run must not leak one. */
  static async killAll(): Promise<void> {
    await Promise.all([...ReplicaProcess.#live].map((r) => r.kill('SIGKILL')));
  }

  readonly logs: LogLine[] = [];
  readonly stderr: string[] = [];
  readonly startedAt = Date.now();
  readonly exited: Promise<Exit>;
  readonly #child: ChildProcess;
  readonly #options: ReplicaProcessOptions;
  readonly #waiters: Waiter[] = [];
  #exit: Exit | undefined;

  /** `env` goes over this process's environment. */
  constructor(
    consumerFile: string,
    dataDir: string,
    brokers: readonly string[],
    env: NodeJS.ProcessEnv = {},
    options: ReplicaProcessOptions = {},
  ) {
    this.#options = options;
    const args = [
      ...(options.nodeArgs ?? []),
      BIN,
      'run',
      '-c',
      consumerFile,
      '--data-dir',
      dataDir,
      '--brokers',
      brokers.join(','),
      ...(options.logLevel !== undefined ? ['--log-level', options.logLevel] : []),
      '--metrics-port',
      String(options.metricsPort ?? 0),
      '--metrics-host',
      '127.0.0.1',
    ];
    const childEnv = { ...process.env, ...env };
    const parse = options.parseLogs ?? true;
    if (!parse && options.logFile !== undefined) {
      // Written by the child itself: its log (and its workers') is whole even if this process dies first.
      const fd = openSync(options.logFile, 'a');
      try {
        this.#child = spawn(process.execPath, args, { stdio: ['ignore', fd, fd], env: childEnv });
      } finally {
        closeSync(fd);
      }
    } else {
      this.#child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: childEnv });
      this.#read(
        options.logFile !== undefined ? createWriteStream(options.logFile, { flags: 'a' }) : undefined,
      );
    }
    ReplicaProcess.#live.add(this);
    this.exited = new Promise((resolve) =>
      this.#child.on('exit', (code, signal) => {
        ReplicaProcess.#live.delete(this);
        this.#exit = { code, signal };
        for (const w of this.#waiters.splice(0)) w.resolve(undefined);
        resolve(this.#exit);
      }),
    );
  }

  #read(file: WriteStream | undefined): void {
    let buffered = '';
    this.#child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      file?.write(chunk);
      buffered += chunk;
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const text of lines) if (text.trim()) this.#take(text);
    });
    this.#child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      file?.write(chunk);
      this.stderr.push(chunk);
    });
    this.#child.on('close', () => file?.end());
  }

  #take(text: string): void {
    let line: LogLine;
    try {
      line = JSON.parse(text) as LogLine;
    } catch {
      line = { level: 50, msg: text };
    }
    this.logs.push(line);
    this.#options.onLine?.(line);
    for (const w of [...this.#waiters]) {
      if (w.test(line)) {
        this.#waiters.splice(this.#waiters.indexOf(w), 1);
        w.resolve(line);
      }
    }
  }

  get pid(): number {
    return this.#child.pid!;
  }

  /** False once the process has exited (by itself or by a signal). */
  get alive(): boolean {
    return this.#exit === undefined;
  }

  /**
   * The next log line from now on that passes `test`; undefined when `timeoutMs` passes
   * or the process exits first.
   */
  next(test: (l: LogLine) => boolean, timeoutMs: number): Promise<LogLine | undefined> {
    this.#mustParse();
    if (!this.alive) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const waiter: Waiter = {
        test,
        resolve: (line) => {
          clearTimeout(timer);
          resolve(line);
        },
      };
      const timer = setTimeout(() => {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        resolve(undefined);
      }, timeoutMs);
      this.#waiters.push(waiter);
    });
  }

  /** The first log line (already seen or still to come) that passes `test`; rejects when none comes. */
  async waitFor(test: (l: LogLine) => boolean, timeoutMs = 90_000): Promise<LogLine> {
    this.#mustParse();
    const line = this.logs.find(test) ?? (await this.next(test, timeoutMs));
    if (line) return line;
    throw this.alive
      ? new ReplicaProcessError(
          'NO_SUCH_LINE',
          `no matching log line within ${timeoutMs} ms; last lines:\n${this.tail()}`,
        )
      : new ReplicaProcessError(
          'EXITED',
          `replica exited (code ${this.#exit!.code}, signal ${this.#exit!.signal}) before the expected line:\n${this.tail()}`,
        );
  }

  waitForEvent(event: string, timeoutMs?: number): Promise<LogLine> {
    return this.waitFor((l) => l.event === event, timeoutMs);
  }

  /** The metrics server's port (it listens before recovery starts). */
  async metricsPort(): Promise<number> {
    if (this.#options.metricsPort) return this.#options.metricsPort;
    return (await this.waitForEvent('metrics.listening')).port as number;
  }

  /** Resolves once /readyz answers (the replica joined its group); rejects if it exits or `timeoutMs` passes. */
  async waitReady(timeoutMs = 90_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const port = await this.metricsPort();
    while (Date.now() < deadline) {
      if (!this.alive)
        throw new ReplicaProcessError(
          'EXITED',
          `the replica exited (code ${this.#exit!.code}, signal ${this.#exit!.signal}) before it was ready`,
        );
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ready) return;
      await new Promise((r) => setTimeout(r, 250));
    }
    throw new ReplicaProcessError(
      'NOT_READY',
      `the replica did not join the group within ${timeoutMs / 1000} s`,
    );
  }

  /** The text of its /metrics page. */
  async metricsText(): Promise<string> {
    return (await fetch(`http://127.0.0.1:${await this.metricsPort()}/metrics`)).text();
  }

  /** Its /metrics, parsed. */
  async metrics(): Promise<Sample[]> {
    return scrape(await this.metricsPort());
  }

  /** Sends `signal` unless it has exited; a stopped (zombie) process is woken first for a SIGTERM it must act on. */
  signal(signal: NodeJS.Signals): void {
    if (!this.alive) return;
    if (signal === 'SIGTERM') this.#child.kill('SIGCONT');
    this.#child.kill(signal);
  }

  /** Sends `signal` (SIGKILL unless told) and waits for the exit; a failed graceful stop prints its last lines. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<Exit> {
    if (this.alive) this.#child.kill(signal);
    const exit = await this.exited;
    if (signal !== 'SIGKILL' && exit.code !== 0) {
      console.error(`replica ${this.pid} exited ${JSON.stringify(exit)}:\n${this.tail(25)}`);
    }
    return exit;
  }

  /** SIGTERM (flush, commit, finish the publication), SIGKILL if it has not exited after `timeoutMs`. */
  async stop(timeoutMs = 90_000): Promise<Exit> {
    this.signal('SIGTERM');
    const timer = setTimeout(() => this.signal('SIGKILL'), timeoutMs);
    const exit = await this.exited;
    clearTimeout(timer);
    return exit;
  }

  /** Its last log lines and stderr, for a failure message. */
  tail(n = 15): string {
    return [
      ...this.logs.slice(-n).map((l) => JSON.stringify(l).slice(0, 400)),
      ...this.stderr.slice(-5),
    ].join('\n');
  }

  #mustParse(): void {
    if (this.#options.parseLogs === false)
      throw new ReplicaProcessError(
        'LOGS_NOT_PARSED',
        'this replica writes its log to a file only; read the file',
      );
  }
}
