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
  readonly children?: readonly number[];
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
  /** Busy seconds per pipeline stage (STAGES), each sample charged to its nearest caller of a known stage. */
  readonly stages: Record<string, number>;
}

/**
 * The pipeline's stages, by the source of the innermost frame of a sample's stack that
 * belongs to one (a library frame, apache-arrow's or node's Buffer, is charged to the
 * nearest caller that does): the per-stage account of the report.
 */
export const STAGES: readonly (readonly [stage: string, test: RegExp])[] = [
  ['GC', /^\(garbage collector\)$/],
  ['system index upkeep', /(src\/materializer\/index-upkeep|src\/lance\/index-keeper)\.js$/],
  [
    'consume (kafkajs, record batches)',
    /(node_modules\/kafkajs\/|src\/kafka\/(record-decoding|fetched-batch|compression|client|ingestion|batch-runner))/,
  ],
  ['decode', /src\/decode\//],
  ['stage + fsync', /(src\/staging\/|src\/pool\/)/],
  [
    'read back for publication',
    /src\/materializer\/(preparation|publication-file|source-buffers|publication-check)\.js$/,
  ],
  ['LanceDB add (JavaScript side)', /(node_modules\/@lancedb\/|src\/lance\/)/],
];

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
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stageOf = (id: number): string => {
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const f = byId.get(at)?.callFrame;
      if (!f) break;
      const key = f.functionName === '(garbage collector)' ? f.functionName : f.url;
      const hit = STAGES.find(([, test]) => test.test(key));
      if (hit) return hit[0];
    }
    return 'other (timers, metrics, group protocol, start-up)';
  };
  const stages: Record<string, number> = {};
  const functions = new Map<string, number>();
  const files = new Map<string, number>();
  let busy = 0;
  let gc = 0;
  for (const [id, micros] of self) {
    const frame = byId.get(id)?.callFrame;
    if (!frame || frame.functionName === '(idle)') continue;
    busy += micros;
    if (frame.functionName === '(garbage collector)') gc += micros;
    const stage = stageOf(id);
    stages[stage] = (stages[stage] ?? 0) + micros / 1e6;
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
    stages: Object.fromEntries(Object.entries(stages).map(([k, v]) => [k, round(v, 2)])),
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

/** The native threads of a replica (/proc, by kernel name) and the stage each works for. */
const NATIVE_STAGES: readonly (readonly [thread: RegExp, stage: string])[] = [
  [/^other: (lance-cpu|tokio-rt-worker)/, 'LanceDB add (Rust threads: encode, write, commit)'],
  [/^other: V8Worker/, 'GC (V8 helper threads: concurrent marking, parallel scavenges)'],
  [/^other: libuv-worker/, 'stage + fsync, read back (libuv pool: fsync, file reads)'],
];

/**
 * The per-stage CPU account of a profiled replica, in CPU seconds per GiB: the JavaScript
 * threads' busy time by stage (each thread's profile scaled to its CPU from /proc, since
 * the profiler's samples miss part of it) and the native threads by what they do.
 */
export function stageAccount(
  threads: readonly ThreadProfile[],
  threadCpu: Readonly<Record<string, number>>,
  gib: number,
): Record<string, number> {
  const out: Record<string, number> = {};
  const add = (stage: string, cpu: number) => (out[stage] = (out[stage] ?? 0) + cpu / gib);
  for (const [name, cpu] of Object.entries(threadCpu)) {
    const native = NATIVE_STAGES.find(([test]) => test.test(name));
    if (native) {
      add(native[1], cpu);
      continue;
    }
    const profiled = threads.filter(
      (t) => t.thread === name || (name.startsWith('staging') && t.thread === 'staging worker'),
    );
    const busy = profiled.reduce((n, t) => n + t.busySeconds, 0);
    if (busy === 0) {
      add(`other threads (${name})`, cpu);
      continue;
    }
    for (const t of profiled)
      for (const [stage, seconds] of Object.entries(t.stages)) add(stage, (cpu * seconds) / busy);
  }
  return Object.fromEntries(
    Object.entries(out)
      .filter(([, v]) => v >= 0.005)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => [k, round(v, 2)]),
  );
}
