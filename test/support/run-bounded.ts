import { spawnSync, type SpawnSyncOptions } from 'node:child_process';

/** What a bounded child process left: its exit code (1 when it had none) and its output. */
export interface BoundedRun {
  readonly status: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly timedOut: boolean;
}

/**
 * spawnSync with a deadline. spawnSync blocks the jest worker's event loop, so jest's
 * own test and hook timeouts cannot fire while it waits: a child that never exits
 * would hang the whole test run (CI's only symptom is its overall time limit). Past
 * the deadline the child is SIGKILLed and the result says so in stderr.
 */
export function runBounded(
  command: string,
  args: readonly string[],
  options: Omit<SpawnSyncOptions, 'encoding' | 'timeout' | 'killSignal'> & { timeoutMs?: number } = {},
): BoundedRun {
  const { timeoutMs = 240_000, ...rest } = options;
  const result = spawnSync(command, args, {
    ...rest,
    encoding: 'utf8',
    timeout: timeoutMs,
    killSignal: 'SIGKILL',
  });
  const error: NodeJS.ErrnoException | undefined = result.error;
  const timedOut = error?.code === 'ETIMEDOUT';
  const note = timedOut ? `\n${command} ${args.join(' ')}: killed after ${timeoutMs} ms without exiting` : '';
  return {
    status: result.status ?? 1,
    stdout: String(result.stdout ?? ''),
    stderr: `${String(result.stderr ?? '')}${note}`,
    timedOut,
  };
}
