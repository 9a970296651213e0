import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';

/**
 * bin/kafka-lance of this checkout, found by walking up to kafka-lance's package.json:
 * this file runs from source under jest (test/support) and compiled when a qualification
 * step uses it (dist/test/support), so a fixed number of `..` is right in only one.
 */
const BIN = path.join(repositoryRoot(__dirname), 'bin/kafka-lance');

function repositoryRoot(from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (
      existsSync(manifest) &&
      (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'kafka-lance'
    )
      return dir;
    if (path.dirname(dir) === dir) throw new Error(`no kafka-lance package.json above ${from}`);
  }
}

export interface LogLine {
  readonly level: number;
  readonly event?: string;
  readonly msg?: string;
  readonly [key: string]: unknown;
}

/**
 * A replica run as a real child process through the same compiled entry point a
 * user runs (`bin/kafka-lance run`), so that tests can SIGKILL it.
 */
export class ReplicaProcess {
  static readonly #live = new Set<ReplicaProcess>();

  /** SIGKILLs every replica a test left running (a failed assertion must not leak processes). */
  static async killAll(): Promise<void> {
    await Promise.all([...ReplicaProcess.#live].map((r) => r.kill('SIGKILL')));
  }

  readonly logs: LogLine[] = [];
  readonly stderr: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly #child: ChildProcessByStdio<null, Readable, Readable>;
  readonly #waiters: { test: (l: LogLine) => boolean; resolve: (l: LogLine) => void }[] = [];

  constructor(
    consumerFile: string,
    dataDir: string,
    brokers: readonly string[],
    env: NodeJS.ProcessEnv = {},
  ) {
    this.#child = spawn(
      process.execPath,
      [
        BIN,
        'run',
        '-c',
        consumerFile,
        '--data-dir',
        dataDir,
        '--brokers',
        brokers.join(','),
        '--log-level',
        'info',
        // Several replicas run at once: each takes a free port (see metricsPort()).
        '--metrics-port',
        '0',
        '--metrics-host',
        '127.0.0.1',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } },
    );
    let buffered = '';
    this.#child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      buffered += chunk;
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const text of lines) {
        if (!text.trim()) continue;
        let line: LogLine;
        try {
          line = JSON.parse(text) as LogLine;
        } catch {
          line = { level: 50, msg: text };
        }
        this.logs.push(line);
        for (const w of [...this.#waiters]) {
          if (w.test(line)) {
            this.#waiters.splice(this.#waiters.indexOf(w), 1);
            w.resolve(line);
          }
        }
      }
    });
    this.#child.stderr.setEncoding('utf8').on('data', (chunk: string) => this.stderr.push(chunk));
    // Registered for killAll(): a test that fails before it stops its replica must not
    // leave it running (it kept jest from exiting and the broker busy).
    ReplicaProcess.#live.add(this);
    this.exited = new Promise((resolve) =>
      this.#child.on('exit', (code, signal) => {
        ReplicaProcess.#live.delete(this);
        resolve({ code, signal });
      }),
    );
  }

  /** The metrics server's port (it listens before recovery starts). */
  async metricsPort(): Promise<number> {
    return (await this.waitForEvent('metrics.listening')).port as number;
  }

  get pid(): number {
    return this.#child.pid!;
  }

  /** The first log line (already seen or still to come) that passes `test`. */
  waitFor(test: (l: LogLine) => boolean, timeoutMs = 90_000): Promise<LogLine> {
    const seen = this.logs.find(test);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no matching log line within ${timeoutMs} ms; last lines:\n${this.tail()}`)),
        timeoutMs,
      );
      this.#waiters.push({
        test,
        resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
      });
      void this.exited.then(({ code, signal }) =>
        reject(
          new Error(
            `replica exited (code ${code}, signal ${signal}) before the expected line:\n${this.tail()}`,
          ),
        ),
      );
    });
  }

  waitForEvent(event: string, timeoutMs?: number): Promise<LogLine> {
    return this.waitFor((l) => l.event === event, timeoutMs);
  }

  async kill(
    signal: NodeJS.Signals = 'SIGKILL',
  ): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill(signal);
    const exit = await this.exited;
    if (signal !== 'SIGKILL' && exit.code !== 0) {
      console.error(`replica ${this.pid} exited ${JSON.stringify(exit)}:\n${this.tail(25)}`);
    }
    return exit;
  }

  tail(n = 15): string {
    return [
      ...this.logs.slice(-n).map((l) => JSON.stringify(l).slice(0, 400)),
      ...this.stderr.slice(-5),
    ].join('\n');
  }
}
