/** report.md and report.json from the arms' results. */
import { renderProfiles, type ThreadProfile } from './cpu-profile';
import type { Freshness } from './replica-arm';
import { round, type ArmResult } from './result';

export interface BenchReport {
  readonly date: string;
  readonly machine: string;
  readonly command: string;
  readonly records: number;
  readonly partitions: number;
  readonly recordBytes: number;
  readonly produceSeconds: number;
  readonly totalSeconds: number;
  readonly arms: ArmResult[];
  readonly freshness?: Freshness;
  /** The buffered end-to-end arm run once more under `--cpu-prof` (not in the summary: profiling slows it). */
  readonly profile?: {
    readonly mibPerSecond: number;
    readonly threads: readonly ThreadProfile[];
    /** CPU s per GiB by pipeline stage (cpu-profile.ts's stageAccount). */
    readonly stages?: Record<string, number>;
  };
  readonly ratios: Record<string, number>;
  readonly targets: { readonly name: string; readonly pass: boolean; readonly detail: string }[];
}

const GiB = 1024 ** 3;

/**
 * The performance issues' targets: end to end with defaults ≥ 1.5 × each Python peer's MiB/s
 * at no more CPU per GiB (the orjson consumer and the one on pyarrow's JSON reader), ≥ 2 ×
 * the naive Node arm, peak RSS ≤ 512 MiB, freshness p99 ≤ 3 s, and every arm exactly once.
 */
export function ratiosAndTargets(
  arms: readonly ArmResult[],
  freshness?: Freshness,
): Pick<BenchReport, 'ratios' | 'targets'> {
  const by = (id: string) => arms.find((a) => a.id === id && a.problems.length === 0);
  const ratios: Record<string, number> = {};
  const targets: BenchReport['targets'] = [];
  const consume = by('consume');
  const write = by('write');
  const limit = consume && write ? Math.min(consume.recordsPerSecond, write.recordsPerSecond) : undefined;
  for (const e2e of ['e2e-buffered', 'e2e-streamed']) {
    const a = by(e2e);
    if (!a) continue;
    if (limit) ratios[`${e2e} / min(consume, write)`] = round(a.recordsPerSecond / limit, 2);
    for (const naive of ['naive-node', 'naive-python', 'naive-python-arrow']) {
      const n = by(naive);
      if (n) ratios[`${e2e} / ${naive}`] = round(a.recordsPerSecond / n.recordsPerSecond, 2);
    }
  }
  const buffered = by('e2e-buffered');
  if (buffered) {
    for (const id of ['naive-python', 'naive-python-arrow']) {
      const py = by(id);
      if (!py) continue;
      targets.push({
        name: `e2e buffered ≥ 1.5 × ${id}`,
        pass: buffered.recordsPerSecond >= 1.5 * py.recordsPerSecond,
        detail: `${buffered.mibPerSecond} vs 1.5 × ${py.mibPerSecond} MiB/s`,
      });
      const perGiB = (a: ArmResult) => round(a.cpuSeconds / (a.bytes / GiB), 1);
      targets.push({
        name: `e2e buffered CPU s/GiB ≤ ${id}`,
        pass: perGiB(buffered) <= perGiB(py),
        detail: `${perGiB(buffered)} vs ${perGiB(py)} CPU s/GiB`,
      });
    }
    const node = by('naive-node');
    if (node)
      targets.push({
        name: 'e2e buffered ≥ 2 × naive Node',
        pass: buffered.recordsPerSecond >= 2 * node.recordsPerSecond,
        detail: `${buffered.mibPerSecond} vs 2 × ${node.mibPerSecond} MiB/s`,
      });
    if (limit)
      targets.push({
        name: 'e2e buffered ≥ 0.8 × min(consume-only, write-only)',
        pass: buffered.recordsPerSecond >= 0.8 * limit,
        detail: `${buffered.recordsPerSecond} vs 0.8 × ${limit} records/s`,
      });
  }
  // Registry formats carry the same records in fewer bytes: compared per record, not per byte.
  for (const id of ['e2e-avro', 'e2e-protobuf']) {
    const a = by(id);
    if (!a || !buffered) continue;
    ratios[`${id} / e2e-buffered`] = round(a.recordsPerSecond / buffered.recordsPerSecond, 2);
    targets.push({
      name: `${id} records/s ≥ e2e buffered (JSON, the same records)`,
      pass: a.recordsPerSecond >= buffered.recordsPerSecond,
      detail: `${a.recordsPerSecond} vs ${buffered.recordsPerSecond} records/s`,
    });
    const perRecord = (x: ArmResult) => round((x.cpuSeconds / x.expectedRows) * 1e6, 1);
    targets.push({
      name: `${id} CPU per record ≤ e2e buffered (JSON, the same records)`,
      pass: a.cpuSeconds / a.expectedRows <= buffered.cpuSeconds / buffered.expectedRows,
      detail: `${perRecord(a)} vs ${perRecord(buffered)} CPU µs/record`,
    });
  }
  for (const codec of ['gzip', 'snappy', 'lz4', 'zstd']) {
    const a = by(`e2e-${codec}`);
    if (!a || !buffered) continue;
    ratios[`e2e-${codec} / e2e-buffered`] = round(a.recordsPerSecond / buffered.recordsPerSecond, 2);
    if (codec === 'lz4' || codec === 'zstd')
      targets.push({
        name: `e2e with ${codec} ≥ 0.85 × e2e buffered (uncompressed)`,
        pass: a.recordsPerSecond >= 0.85 * buffered.recordsPerSecond,
        detail: `${a.mibPerSecond} vs 0.85 × ${buffered.mibPerSecond} MiB/s`,
      });
  }
  for (const id of ['e2e-buffered', 'e2e-streamed', 'e2e-gzip', 'e2e-snappy', 'e2e-lz4', 'e2e-zstd']) {
    const a = arms.find((x) => x.id === id);
    if (a)
      targets.push({
        name: `${id} peak RSS ≤ 512 MiB`,
        pass: a.peakRssMiB <= 512,
        detail: `${a.peakRssMiB} MiB`,
      });
  }
  if (freshness)
    targets.push({
      name: `freshness p99 ≤ 3 s at ${freshness.rate} records/s`,
      pass: freshness.p99Seconds <= 3,
      detail: `p99 ${freshness.p99Seconds} s`,
    });
  for (const a of arms) {
    targets.push({
      name: `${a.id} handled every row exactly once`,
      pass: a.problems.length === 0,
      detail: a.problems.length ? a.problems.join('; ') : `${a.verifiedRows ?? a.rows} rows`,
    });
  }
  return { ratios, targets };
}

function table(head: string[], rows: (string | number)[][]): string {
  return [
    `| ${head.join(' | ')} |`,
    `| ${head.map(() => '---').join(' | ')} |`,
    ...rows.map(
      (r) => `| ${r.map((c) => (typeof c === 'number' ? c.toLocaleString('en') : c)).join(' | ')} |`,
    ),
  ].join('\n');
}

export function renderMarkdown(r: BenchReport, svgName: string): string {
  const out: string[] = [];
  out.push(
    '# kafka-lance bench report',
    '',
    `Generated by \`${r.command}\` on ${r.date} (${r.machine}), ${r.totalSeconds.toFixed(0)} s in all.`,
    `Data: ${r.records.toLocaleString('en')} JSON log records of ~${r.recordBytes} bytes in ${r.partitions} partitions` +
      (r.produceSeconds
        ? `, produced in ${r.produceSeconds.toFixed(1)} s.`
        : ' (topic reused from an earlier run).'),
    'Every arm runs in its own process, one after another, on the same topic (a fresh group each).',
    '"other cores busy": CPU the rest of the machine used while the arm ran (the Kafka broker, and any other ' +
      'process on this shared 2-core machine), in cores; an arm measured while others ran is slower than it would be alone.',
    'MiB/s are of the JSON the rows came from; timed from the arm’s start (group join, or data prepared) to its last row done (visible in Lance for the writing arms).',
    'CPU s is the process’s own accounting (every thread, user + system) from its first record to its last row, the same way for every arm ' +
      '(start-up, imports, the group join and the final row count excluded; bench/README.md). The peers, the per-stage CPU account and ' +
      'the before → after of each change: [peers.md](peers.md); vectors: [vectors.md](vectors.md).',
    '',
    '## Summary',
    '',
    table(
      [
        'arm',
        'MiB/s',
        'records/s',
        'timed s',
        'wall s',
        'peak RSS MiB',
        'CPU s',
        'CPU s / GiB',
        'other cores busy',
        'rows check',
      ],
      r.arms.map((a) => [
        `${a.id}: ${a.label}`,
        a.mibPerSecond,
        a.recordsPerSecond,
        a.seconds,
        a.wallSeconds,
        a.peakRssMiB,
        a.cpuSeconds,
        a.bytes ? round(a.cpuSeconds / (a.bytes / GiB), 1) : '–',
        a.otherCores,
        a.problems.length
          ? `**${a.problems.join('; ')}**`
          : `ok (${(a.verifiedRows ?? a.rows).toLocaleString('en')})`,
      ]),
    ),
    '',
    `![throughput and RSS over time](${svgName})`,
    '',
    '## Targets',
    '',
    ...r.targets.map((t) => `- ${t.pass ? 'PASS' : 'FAIL'}: ${t.name} (${t.detail})`),
    '',
    '## Ratios (records/s)',
    '',
    ...Object.entries(r.ratios).map(([k, v]) => `- ${k}: ${v}`),
    '',
  );
  const e2e = r.arms.filter((a) => a.stages);
  if (e2e.length) {
    const threadNames = [...new Set(e2e.flatMap((a) => Object.keys(a.threadCpuSeconds)))].sort();
    out.push(
      '## CPU seconds per GiB of JSON, per thread of the replica',
      '',
      'From /proc/<pid>/task/<tid>/stat (utime + stime) of the replica process; worker threads tag their tid ' +
        '(bench/thread-tag.ts, preloaded with NODE_OPTIONS=--require, reads /proc/thread-self); "other" are ' +
        'untagged threads by kernel name (V8 platform and GC helpers, libuv pool, Lance/tokio runtime threads).',
      '',
      table(
        ['thread', ...e2e.map((a) => a.id)],
        [...threadNames, 'whole process tree'].map((n) => [
          n,
          ...e2e.map((a) => {
            const cpu = n === 'whole process tree' ? a.cpuSeconds : a.threadCpuSeconds[n];
            return cpu !== undefined && a.bytes ? round(cpu / (a.bytes / GiB), 2) : '–';
          }),
        ]),
      ),
      '',
      '## Where the time goes',
      '',
      'Wall-clock phases (seconds since the replica process was spawned; polled every 0.5 s):',
      '',
      table(
        ['phase', ...e2e.map((a) => a.id)],
        Object.entries(e2e[0]!.phases ?? {})
          .sort((a, b) => a[1] - b[1])
          .map(([p]) => [p, ...e2e.map((a) => a.phases?.[p] ?? '–')]),
      ),
      '',
      'Stage totals from the replica’s /metrics at the end (histogram sums in seconds; several stages run at once, ' +
        'so they do not add up to the wall time):',
      '',
      table(
        ['metric', ...e2e.map((a) => a.id)],
        Object.keys(e2e[0]!.stages ?? {}).map((k) => [k, ...e2e.map((a) => a.stages?.[k] ?? '–')]),
      ),
      '',
    );
  }
  if (r.freshness) {
    const f = r.freshness;
    out.push(
      '## Freshness (Kafka produce timestamp → visible in Lance)',
      '',
      `A replica (buffered, defaults) on an empty topic while \`produce\` writes ${f.rate} records/s of ~800 bytes for ${f.seconds} s; ` +
        `a poller reads new rows every ${f.pollMs} ms (adds up to ${f.pollMs} ms).`,
      '',
      `- p50 ${f.p50Seconds} s, p99 ${f.p99Seconds} s, max ${f.maxSeconds} s over ${f.visibleRows.toLocaleString('en')} of ${f.rows.toLocaleString('en')} rows; replica peak RSS ${f.peakRssMiB} MiB` +
        (f.problems.length ? ` — **${f.problems.join('; ')}**` : ''),
      '',
    );
  }
  if (r.profile) {
    out.push(
      '## Profile of the end-to-end arm (buffered, defaults, `--cpu-prof` on every thread)',
      '',
      `The same replica run once more with V8's sampling profiler (${r.profile.mibPerSecond} MiB/s while profiled); ` +
        'self time per function, busiest thread first. The stage that limits end to end is the busiest thread.',
      '',
      ...(r.profile.stages
        ? [
            '### Per-stage CPU account (CPU s per GiB of JSON)',
            '',
            "Each JavaScript thread's CPU (from /proc, first record to last row) split by the stage its profile samples " +
              "were charged to (the innermost frame of the stack from a stage's source: kafkajs and src/kafka = consume, " +
              "src/decode = decode, src/staging and src/pool = stage, the materializer's preparation = read back, " +
              'src/lance and @lancedb = the add, index-upkeep = system indexes); the native threads by what they run.',
            '',
            table(
              ['stage', 'CPU s / GiB'],
              Object.entries(r.profile.stages).map(([k, v]) => [k, v]),
            ),
            '',
          ]
        : []),
      ...renderProfiles(r.profile.threads),
    );
  }
  return out.join('\n');
}
