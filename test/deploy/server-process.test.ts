import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { runBounded } from '../support/run-bounded';

const LIB = path.resolve(__dirname, '../../deploy/lib/server-process.sh');

/** Runs `script` in bash with deploy/lib/server-process.sh sourced and a `say` that prints. */
function withLib(script: string): { status: number; stdout: string } {
  return runBounded('bash', ['-c', `say() { echo "$*"; }; source '${LIB}'; ${script}`], {
    timeoutMs: 60_000,
  });
}

/** Runs `fn` with a pid file path in a fresh temporary directory, removed afterwards. */
async function withPidFile(prefix: string, fn: (pidfile: string, dir: string) => void): Promise<void> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), prefix));
  try {
    fn(path.join(dir, 'server.pid'), dir);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

/** A parent that never reaps its exited child: the child stays a zombie while the parent lives. */
function zombieParent(): Promise<{ parent: ChildProcess; zombie: number }> {
  const parent = spawn('python3', [
    '-c',
    'import os, sys, time\npid = os.fork()\nif pid == 0: os._exit(0)\nprint(pid, flush=True)\ntime.sleep(60)',
  ]);
  return new Promise((resolve, reject) => {
    parent.stdout.once('data', (chunk: Buffer) => resolve({ parent, zombie: Number(String(chunk).trim()) }));
    parent.once('error', reject);
  });
}

test('a server that died but was never reaped (a zombie) reads as not running, and stopping it returns', async () => {
  const { parent, zombie } = await zombieParent();
  try {
    // Wait until the child has exited and shows as a zombie in /proc.
    expect(
      withLib(`for i in $(seq 50); do grep -q ') Z' /proc/${zombie}/stat && exit 0; sleep 0.1; done; exit 1`)
        .status,
    ).toBe(0);
    expect(withLib(`kill -0 ${zombie}`).status).toBe(0); // what the scripts used to trust
    expect(withLib(`alive ${zombie}`).status).toBe(1);
    expect(withLib(`stop_pid ${zombie} 2`).status).toBe(0);
  } finally {
    parent.kill('SIGKILL');
  }
});

test('a server that ignores TERM is killed once the stop timeout passes, and stop says so', () => {
  const out = withLib(
    `bash -c 'trap "" TERM; while true; do sleep 0.1; done' & pid=$!; sleep 0.3; stop_pid $pid 1; echo "rc=$?"; alive $pid && echo still-alive || echo gone`,
  );
  expect(out.stdout).toContain('did not stop within 1s; sending KILL');
  expect(out.stdout).toContain('rc=0');
  expect(out.stdout).toContain('gone');
});

test('a live server reads as running', () => {
  expect(withLib(`sleep 5 & pid=$!; alive $pid; rc=$?; kill $pid; exit $rc`).status).toBe(0);
});

test('a pid file whose pid now names another process (the server died and its pid was reused) reads as not running, and stopping it leaves that process alone', () =>
  withPidFile('pid-reuse-', (pidfile) => {
    // A live process recorded as itself reads as running.
    const recorded = withLib(
      `sleep 30 & pid=$!; pid_record '${pidfile}' $pid; pid_running '${pidfile}' && echo running; kill $pid`,
    );
    expect(recorded.stdout.trim()).toBe('running');
    // The same pid with another start time is what a reused pid looks like.
    const out = withLib(
      `sleep 30 & pid=$!; pid_record '${pidfile}' $pid; echo "$pid 1" > '${pidfile}.start';` +
        ` pid_running '${pidfile}' && echo running || echo stopped;` +
        ` stop_recorded '${pidfile}' 5 here; alive $pid && echo survived; kill $pid;` +
        ` test -e '${pidfile}' || echo forgotten`,
    );
    expect(out.stdout.split('\n').filter(Boolean)).toEqual([
      'stopped',
      expect.stringMatching(/^\S+server\.pid names pid \d+, another process now; not signalling it$/),
      'not running on here',
      'survived',
      'forgotten',
    ]);
    // A process that exited before it was recorded is recorded as gone: no process started then.
    const gone = withLib(
      `true & pid=$!; wait $pid; pid_record '${pidfile}' $pid; cat '${pidfile}.start'; echo "$pid"`,
    );
    const [start, pid] = gone.stdout.trim().split('\n');
    expect(start).toBe(`${pid} gone`);
  }));

test('a start time recorded for another pid (left beside a pid file a script without start times wrote) is ignored: the pid names the server', () =>
  withPidFile('pid-legacy-', (pidfile) => {
    const out = withLib(
      `sleep 30 & old=$!; pid_record '${pidfile}' $old; kill $old; wait $old 2>/dev/null;` +
        ` sleep 30 & pid=$!; echo $pid > '${pidfile}';` +
        ` pid_running '${pidfile}' && echo running; stop_recorded '${pidfile}' 5 here;` +
        ` alive $pid && echo survived || echo gone`,
    );
    expect(out.stdout.split('\n').filter(Boolean)).toEqual([
      'running',
      expect.stringMatching(/^stopped \(pid \d+\)$/),
      'gone',
    ]);
  }));

test('stop_recorded stops the recorded server and forgets it', () =>
  withPidFile('pid-stop-', (pidfile, dir) => {
    const out = withLib(
      `sleep 30 & pid=$!; pid_record '${pidfile}' $pid; stop_recorded '${pidfile}' 5 here;` +
        ` alive $pid && echo survived; ls '${dir}' | wc -l`,
    );
    expect(out.stdout).toMatch(/^stopped \(pid \d+\)$/m);
    expect(out.stdout).not.toContain('survived');
    expect(out.stdout.trim().split('\n').pop()).toBe('0');
  }));

test('two processes fetching the same thing on first use at once: one fetches, the other waits and finds it done', async () => {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'first-use-'));
  try {
    // Each "fetch" unpacks into one temporary directory, as Maven does, and appends to a log.
    const fetch = `fetch_now() { mkdir "${dir}/lib.tmp" || exit 3; echo fetched >> "${dir}/runs"; sleep 1; touch "${dir}/lib.tmp/.complete"; mv "${dir}/lib.tmp" "${dir}/lib"; }`;
    const both = [1, 2].map(
      () =>
        new Promise<number | null>((resolve) => {
          const child = spawn('bash', [
            '-c',
            `say() { :; }; source '${LIB}'; ${fetch}; first_use "${dir}/lib/.complete" "${dir}/lib.lock" fetch_now; test -f "${dir}/lib/.complete"`,
          ]);
          child.once('exit', resolve);
        }),
    );
    expect(await Promise.all(both)).toEqual([0, 0]);
    expect((await fsp.readFile(path.join(dir, 'runs'), 'utf8')).trim().split('\n')).toEqual(['fetched']);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
});
