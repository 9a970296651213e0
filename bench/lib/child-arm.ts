/** Runs an arm in its own process, sampling its process tree, and reads its JSON-line events. */
import { spawn } from 'node:child_process';
import type { ArmEvent } from './arm-protocol';
import { ProcessTreeSampler } from './proc-sampler';
import { MiB, round, type ArmResult } from './result';

export interface ChildArm {
  readonly id: string;
  readonly label: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly expectedRows: number;
  /** The arm writes a Lance table whose row count it reports (verifiedRows). */
  readonly writes: boolean;
  readonly env?: NodeJS.ProcessEnv;
  /** No progress for this long: the arm is stalled and is stopped. */
  readonly stallSeconds?: number;
}

export async function runChildArm(arm: ChildArm, log: (line: string) => void): Promise<ArmResult> {
  const child = spawn(arm.command, [...arm.args], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...arm.env },
  });
  const sampler = new ProcessTreeSampler(child.pid!).start();
  let startedAt: number | undefined;
  let doneAt: number | undefined;
  let done: Extract<ArmEvent, { event: 'done' }> | undefined;
  let firstCpu: number | undefined;
  let lastProgress = sampler.elapsed();
  let buffer = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    buffer += chunk;
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      let e: ArmEvent;
      try {
        e = JSON.parse(line) as ArmEvent;
      } catch {
        continue;
      }
      if (e.event === 'start') startedAt ??= sampler.elapsed();
      else if (e.event === 'first') firstCpu ??= e.cpuSeconds;
      else if (e.event === 'progress') {
        if (e.rows > sampler.rows) lastProgress = sampler.elapsed();
        sampler.rows = e.rows;
        if (e.rows >= arm.expectedRows) doneAt ??= sampler.elapsed();
      } else {
        done = e;
        doneAt ??= sampler.elapsed();
      }
    }
  });
  const stallSeconds = arm.stallSeconds ?? 120;
  const watchdog = setInterval(() => {
    if (sampler.elapsed() - lastProgress > stallSeconds) {
      log(`  ${arm.id}: no progress for ${stallSeconds} s: stopping it`);
      child.kill('SIGKILL');
    }
  }, 1_000);
  const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
  clearInterval(watchdog);
  await sampler.sampleOnce();
  sampler.stop();
  const otherCores = await sampler.otherCores();
  const problems: string[] = [];
  if (code !== 0) problems.push(`exited with code ${code}`);
  const rows = done?.rows ?? sampler.rows;
  if (rows < arm.expectedRows) problems.push(`handled ${rows} of ${arm.expectedRows} rows (lost or stalled)`);
  if (arm.writes && done?.verifiedRows !== arm.expectedRows) {
    problems.push(`its table holds ${done?.verifiedRows ?? 'no'} rows, expected ${arm.expectedRows}`);
  }
  const start = startedAt ?? 0;
  const end = doneAt ?? sampler.elapsed();
  const seconds = Math.max(end - start, 1e-3);
  const bytes = done?.bytes ?? 0;
  return {
    id: arm.id,
    label: arm.label,
    expectedRows: arm.expectedRows,
    rows,
    verifiedRows: done?.verifiedRows,
    problems,
    bytes,
    seconds: round(seconds, 2),
    wallSeconds: round(end, 2),
    mibPerSecond: round(bytes / MiB / seconds),
    recordsPerSecond: Math.round(rows / seconds),
    peakRssMiB: Math.round(sampler.peakRssBytes / MiB),
    otherCores: round(otherCores, 2),
    // The process's own accounting from its first record to its last row when the arm
    // reports it (every arm here does); else the whole process tree's.
    cpuSeconds: round(
      firstCpu !== undefined && done?.cpuSeconds !== undefined
        ? done.cpuSeconds - firstCpu
        : sampler.cpuSeconds(),
      2,
    ),
    processCpuSeconds: round(sampler.cpuSeconds(), 2),
    threadCpuSeconds: roundAll(await sampler.threadCpu()),
    series: sampler.samples.map((s) => ({
      t: round(s.t, 2),
      rssMiB: Math.round(s.rssBytes / MiB),
      rows: s.rows,
    })),
    startedAt: round(start, 2),
    detail: done?.detail ?? {},
  };
}

export function roundAll(r: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(r).map(([k, v]) => [k, round(v, 2)]));
}
