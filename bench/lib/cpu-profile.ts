/**
 * Where the end-to-end arm spends its CPU: the V8 profiles (`--cpu-prof`, one file per
 * thread, workers included) of one kafka-lance replica, reduced to self time per
 * function and per file for each thread. The report's "Profile" section prints them,
 * so that a missed target names the stage and the functions that limit it.
 */
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { round } from './result';

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}
interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
}
interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

export interface ThreadProfile {
  /** main, staging worker, materializer (recognised by the scripts the thread ran). */
  readonly thread: string;
  /** Sampled seconds the thread was not idle. */
  readonly busySeconds: number;
  readonly gcSeconds: number;
  /** Self time of the busiest functions: `name (file:line)` → seconds. */
  readonly topFunctions: readonly { readonly name: string; readonly seconds: number }[];
  /** Self time per source file (node_modules packages by package). */
  readonly topFiles: readonly { readonly file: string; readonly seconds: number }[];
}

const where = (url: string): string => {
  if (!url) return '(native)';
  const modules = url.lastIndexOf('node_modules/');
  if (modules >= 0)
    return url
      .slice(modules + 'node_modules/'.length)
      .split('/')
      .slice(0, 2)
      .join('/');
  const dist = url.indexOf('/dist/');
  return dist >= 0 ? url.slice(dist + '/dist/'.length) : path.basename(url);
};

function threadOf(urls: ReadonlySet<string>): string {
  const ran = (name: string) => [...urls].some((u) => u.endsWith(name));
  if (ran('materializer-worker.js')) return 'materializer';
  if (ran('staging-worker.js')) return 'staging worker';
  return 'main';
}

export function summarizeProfile(profile: CpuProfile, top = 8): ThreadProfile {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const functions = new Map<string, number>();
  const files = new Map<string, number>();
  let busy = 0;
  let gc = 0;
  for (const [id, micros] of self) {
    const frame = byId.get(id)?.callFrame;
    if (!frame || frame.functionName === '(idle)') continue;
    busy += micros;
    if (frame.functionName === '(garbage collector)') gc += micros;
    const file = where(frame.url);
    const name = `${frame.functionName || '(anonymous)'} (${file}${frame.url ? `:${frame.lineNumber + 1}` : ''})`;
    functions.set(name, (functions.get(name) ?? 0) + micros);
    files.set(file, (files.get(file) ?? 0) + micros);
  }
  const topOf = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]).slice(0, top);
  return {
    thread: threadOf(new Set(profile.nodes.map((n) => n.callFrame.url))),
    busySeconds: round(busy / 1e6, 2),
    gcSeconds: round(gc / 1e6, 2),
    topFunctions: topOf(functions).map(([name, s]) => ({ name, seconds: round(s / 1e6, 2) })),
    topFiles: topOf(files).map(([file, s]) => ({ file, seconds: round(s / 1e6, 2) })),
  };
}

/** Every `.cpuprofile` in `dir`, busiest thread first. */
export async function summarizeProfiles(dir: string): Promise<ThreadProfile[]> {
  const names = (await fsp.readdir(dir)).filter((n) => n.endsWith('.cpuprofile'));
  const out: ThreadProfile[] = [];
  for (const name of names) {
    const profile = JSON.parse(await fsp.readFile(path.join(dir, name), 'utf8')) as CpuProfile;
    out.push(summarizeProfile(profile));
  }
  return out.sort((a, b) => b.busySeconds - a.busySeconds);
}

export function renderProfiles(threads: readonly ThreadProfile[]): string[] {
  const lines: string[] = [];
  for (const t of threads) {
    const pct = (s: number) => `${t.busySeconds > 0 ? Math.round((100 * s) / t.busySeconds) : 0} %`;
    lines.push(
      `### ${t.thread}: ${t.busySeconds} s busy, garbage collection ${t.gcSeconds} s (${pct(t.gcSeconds)})`,
      '',
      '| self time | share | function |',
      '| --- | --- | --- |',
      ...t.topFunctions.map((f) => `| ${f.seconds} s | ${pct(f.seconds)} | \`${f.name}\` |`),
      '',
      `By file: ${t.topFiles.map((f) => `${f.file} ${f.seconds} s`).join(', ')}.`,
      '',
    );
  }
  return lines;
}
