/**
 * `npm run bench`: one topic of realistic JSON logs (and the same records in Avro for the
 * e2e-avro arm), eight arms run one after another
 * in their own processes on it, a freshness phase, then bench/report.md, report.json
 * and report.svg. See bench/README.md.
 *
 *   npm run bench -- [--records 1000000] [--arms consume,write,...] [--out bench]
 *   npm run bench -- --backlog [0.5,2]      # drain backlogs of these GiB in each mode (peak RSS)
 *
 * Brokers: KAFKA_BOOTSTRAP_SERVERS, else a local broker (deploy/kafka-local, port
 * KAFKA_LOCAL_PORT, default 9092) started here and stopped at the end.
 */
import { execFileSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { runAvroArm } from './lib/avro-arm';
import { runProtobufArm } from './lib/protobuf-arm';
import { runChildArm } from './lib/child-arm';
import { ensureVenv } from './lib/python-venv';
import { stageAccount, summarizeProfiles } from './lib/cpu-profile';
import { ensureBroker, produceDataset, type Dataset } from './lib/kafka';
import { measureFreshness, runReplicaArm, type Freshness } from './lib/replica-arm';
import { defaultStagingWorkers } from '../src/config/resolve';
import { compressionType, type CompressionName } from '../src/kafka/protocol/compression';
import { benchConsumer, benchRecord } from './lib/records';
import { ratiosAndTargets, renderMarkdown, type BenchReport } from './lib/report';
import { keptSections } from './lib/report-sections';
import { MiB, type ArmResult } from './lib/result';
import { plotSvg } from './lib/svg';

const REPO = path.resolve(__dirname, '../..');
const BENCH = path.join(REPO, 'bench');
const ALL_ARMS = [
  'consume',
  'write',
  'decode',
  'e2e-buffered',
  'e2e-streamed',
  'e2e-avro',
  'e2e-avro-reference',
  'e2e-protobuf',
  'e2e-protobuf-reference',
  'e2e-gzip',
  'e2e-snappy',
  'e2e-lz4',
  'e2e-zstd',
  'naive-node',
  'naive-python',
  'naive-python-arrow',
  'freshness',
  'profile',
] as const;
type ArmId = (typeof ALL_ARMS)[number];
const PARTITIONS = 6;

interface Options {
  readonly records: number;
  readonly arms: ArmId[];
  /** The vector arm (bench/vector-throughput.ts, its own report bench/vectors.md): `vectors` in --arms, or no --arms. */
  readonly vectors: boolean;
  /** The upsert arm (bench/upsert-cost.ts, its own report bench/upserts.md; 11M rows on disk): only `upsert` in --arms. */
  readonly upsert: boolean;
  /** The upsert mode end to end (bench/upsert-e2e.ts, sections of bench/upserts.md and report.md; 11M rows on disk): only `e2e-upsert` in --arms. */
  readonly e2eUpsert: boolean;
  readonly out: string;
  readonly backlogGiB: number[] | undefined;
  readonly freshRate: number;
  readonly freshSeconds: number;
}

function parseOptions(argv: readonly string[]): Options {
  const get = (name: string) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const asked = (get('arms') ?? [...ALL_ARMS, 'vectors'].join(',')).split(',').map((a) => a.trim());
  const arms = asked.filter((a) => a !== 'vectors' && a !== 'upsert' && a !== 'e2e-upsert') as ArmId[];
  for (const a of arms)
    if (!ALL_ARMS.includes(a))
      throw new Error(`unknown arm ${a}: one of ${ALL_ARMS.join(', ')}, vectors, upsert, e2e-upsert`);
  const backlog = argv.indexOf('--backlog');
  const backlogValue = argv[backlog + 1];
  return {
    records: Number(get('records') ?? 1_000_000),
    arms,
    vectors: asked.includes('vectors'),
    upsert: asked.includes('upsert'),
    e2eUpsert: asked.includes('e2e-upsert'),
    out: path.resolve(get('out') ?? BENCH),
    backlogGiB:
      backlog < 0
        ? undefined
        : (backlogValue && !backlogValue.startsWith('--') ? backlogValue : '0.5,2').split(',').map(Number),
    freshRate: Number(get('fresh-rate') ?? 5_000),
    freshSeconds: Number(get('fresh-seconds') ?? 30),
  };
}

const t0 = Date.now();
function log(line: string): void {
  process.stderr.write(`[bench ${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${line}\n`);
}

async function exactBytes(records: number): Promise<number> {
  let bytes = 0;
  for (let n = 0; n < records; n++) bytes += Buffer.byteLength(benchRecord(n));
  return Promise.resolve(bytes);
}

async function runArms(
  o: Options,
  data: Dataset,
  brokers: string[],
  python: string | undefined,
): Promise<{ arms: ArmResult[]; freshness?: Freshness; profile?: BenchReport['profile'] }> {
  const work = await fsp.mkdtemp(path.join(os.tmpdir(), 'kl-bench-'));
  const consumerPath = path.join(work, 'consumer.json');
  await fsp.writeFile(
    consumerPath,
    JSON.stringify({ ...benchConsumer('bench', data.topic, path.join(work, 'dlq.jsonl')), brokers }),
  );
  const arms: ArmResult[] = [];
  const node = (script: string, args: string[]) => ({
    command: process.execPath,
    args: [path.join(__dirname, 'arms', script), ...args],
  });
  const common = ['--records', String(data.records), '--brokers', brokers.join(','), '--topic', data.topic];
  const group = (id: string) => ['--group', `bench-${id}-${Date.now()}`];
  let freshness: Freshness | undefined;
  let profile: BenchReport['profile'];
  for (const id of o.arms) {
    log(`arm ${id}`);
    const lance = path.join(work, `lance-${id}`);
    let result: ArmResult;
    switch (id) {
      case 'consume':
        result = await runChildArm(
          {
            id,
            label: 'kafkajs consume-only (eachBatch, maxBytes 64 MiB, count bytes)',
            ...node('consume-only.js', [...common, ...group(id)]),
            expectedRows: data.records,
            writes: false,
          },
          log,
        );
        break;
      case 'write':
        result = await runChildArm(
          {
            id,
            label: 'Lance write-only (prebuilt Arrow, one add per 64 MiB publication)',
            ...node('write-only.js', [
              '--records',
              String(data.records),
              '--consumer',
              consumerPath,
              '--lance',
              lance,
            ]),
            expectedRows: data.records,
            writes: true,
          },
          log,
        );
        break;
      case 'decode':
        result = await runChildArm(
          {
            id,
            label: `decode-only (JSON → Arrow, src/decode, ${Math.max(1, defaultStagingWorkers())} thread(s), as many as a replica stages on by default here, no disk)`,
            ...node('decode-only.js', ['--records', String(data.records), '--consumer', consumerPath]),
            expectedRows: data.records,
            writes: false,
          },
          log,
        );
        break;
      case 'e2e-buffered':
      case 'e2e-streamed': {
        const streamed = id === 'e2e-streamed';
        result = await runReplicaArm(
          {
            id,
            label: `kafka-lance run, ${streamed ? 'streamed (materializer.pipelinePreparation: true)' : 'buffered (defaults)'}, explicit schema`,
            topic: data.topic,
            records: data.records,
            bytes: data.bytes,
            brokers,
            extra: streamed ? { materializer: { pipelinePreparation: true } } : {},
          },
          log,
        );
        break;
      }
      case 'e2e-gzip':
      case 'e2e-snappy':
      case 'e2e-lz4':
      case 'e2e-zstd': {
        // The same records, produced again in the arm's codec on a topic of their own.
        const codec = id.slice('e2e-'.length) as Exclude<CompressionName, 'none'>;
        const compressed = await produceDataset(
          brokers,
          `${data.topic}-${codec}`,
          data.records,
          PARTITIONS,
          log,
          undefined,
          compressionType(codec),
        );
        result = await runReplicaArm(
          {
            id,
            label: `kafka-lance run, buffered (defaults), explicit schema, the topic's batches ${codec}-compressed`,
            topic: compressed.topic,
            records: compressed.records,
            bytes: data.bytes,
            brokers,
            extra: {},
          },
          log,
        );
        break;
      }
      case 'e2e-avro':
      case 'e2e-avro-reference':
        // The same records in Avro, on a topic of their own (bench/lib/avro-arm.ts).
        result = await runAvroArm(
          { records: data.records, partitions: PARTITIONS, brokers, reference: id === 'e2e-avro-reference' },
          log,
        );
        break;
      case 'e2e-protobuf':
      case 'e2e-protobuf-reference':
        // The same records in Protobuf, on a topic of their own (bench/lib/protobuf-arm.ts).
        result = await runProtobufArm(
          {
            records: data.records,
            partitions: PARTITIONS,
            brokers,
            ...(id === 'e2e-protobuf-reference'
              ? {
                  variant: {
                    id,
                    env: { KAFKA_LANCE_COMPILED_PROTOBUF: 'off' },
                    label: ', reference decoder only (KAFKA_LANCE_COMPILED_PROTOBUF=off)',
                  },
                }
              : {}),
          },
          log,
        );
        break;
      case 'naive-node':
        result = await runChildArm(
          {
            id,
            label: 'naive Node (kafkajs eachBatch → JSON.parse → LanceDB add per batch → commit)',
            ...node('naive-node.js', [...common, ...group(id), '--lance', lance]),
            expectedRows: data.records,
            writes: true,
          },
          log,
        );
        break;
      case 'naive-python':
      case 'naive-python-arrow':
        result = await runChildArm(
          {
            id,
            label:
              id === 'naive-python'
                ? 'naive Python (confluent-kafka 50k batches → orjson → pyarrow columns → lance append → commit)'
                : "Python with pyarrow's JSON reader (confluent-kafka 50k batches → pyarrow.json → lance append → commit)",
            command: python!,
            args: [
              path.join(BENCH, 'arms', 'naive-consumer.py'),
              ...common,
              ...group(id),
              '--lance',
              lance,
              '--reader',
              id === 'naive-python' ? 'orjson' : 'pyarrow-json',
            ],
            expectedRows: data.records,
            writes: true,
          },
          log,
        );
        break;
      case 'freshness':
        freshness = await measureFreshness(brokers, PARTITIONS, o.freshRate, o.freshSeconds, log);
        log(`  freshness p50 ${freshness.p50Seconds} s, p99 ${freshness.p99Seconds} s`);
        continue;
      case 'profile': {
        const dir = path.join(work, 'cpu-profiles');
        const profiled = await runReplicaArm(
          {
            id,
            label: 'kafka-lance run, buffered, under --cpu-prof',
            topic: data.topic,
            records: data.records,
            bytes: data.bytes,
            brokers,
            extra: {},
            nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${dir}`],
          },
          log,
        );
        const threads = await summarizeProfiles(dir);
        profile = {
          mibPerSecond: profiled.mibPerSecond,
          threads,
          stages: stageAccount(threads, profiled.threadCpuSeconds, profiled.bytes / 1024 ** 3),
        };
        for (const t of profile.threads)
          log(`  ${t.thread}: ${t.busySeconds} s busy; top: ${t.topFunctions[0]?.name ?? '-'}`);
        continue;
      }
    }
    log(
      `  ${id}: ${result.mibPerSecond} MiB/s, ${result.recordsPerSecond} records/s, peak RSS ${result.peakRssMiB} MiB` +
        (result.problems.length ? `, PROBLEMS: ${result.problems.join('; ')}` : ''),
    );
    arms.push(result);
    await fsp.rm(lance, { recursive: true, force: true });
  }
  await fsp.rm(work, { recursive: true, force: true });
  return { arms, freshness, profile };
}

function machine(): string {
  return `${os.cpus().length} cores, ${Math.round(os.totalmem() / 1024 ** 3)} GiB, Node ${process.versions.node}, broker on the same machine`;
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  if (process.argv.includes('--render')) {
    const saved = JSON.parse(await fsp.readFile(path.join(o.out, 'report.json'), 'utf8')) as BenchReport;
    // The targets are judged again from the saved measurements (they may have changed since).
    return writeReport(o.out, { ...saved, ...ratiosAndTargets(saved.arms, saved.freshness) });
  }
  if (o.upsert) {
    // No broker: the merge's cost as the table grows, on LanceDB alone.
    log('arm upsert (bench/upsert-cost.ts)');
    execFileSync(
      process.execPath,
      [path.join(__dirname, 'upsert-cost.js'), '--report', path.join(BENCH, 'upserts.md')],
      {
        stdio: ['ignore', 'inherit', 'inherit'],
      },
    );
    if (o.arms.length === 0 && !o.vectors && !o.e2eUpsert) return;
  }
  if (o.e2eUpsert) {
    // Its own broker handling (KAFKA_BOOTSTRAP_SERVERS, or a local one), topics and tables.
    log('arm e2e-upsert (bench/upsert-e2e.ts)');
    execFileSync(
      process.execPath,
      [
        path.join(__dirname, 'upsert-e2e.js'),
        '--report',
        path.join(BENCH, 'upserts.md'),
        '--bench-report',
        path.join(o.out, 'report.md'),
      ],
      { stdio: ['ignore', 'inherit', 'inherit'] },
    );
    if (o.arms.length === 0 && !o.vectors) return;
  }
  const broker = ensureBroker(log);
  try {
    if (o.backlogGiB) return await backlog(o, broker.brokers);
    const python = o.arms.some((a) => a.startsWith('naive-python')) ? ensureVenv(log) : undefined;
    let data = await produceDataset(broker.brokers, `bench-logs-${o.records}`, o.records, PARTITIONS, log);
    if (data.reused) data = { ...data, bytes: await exactBytes(o.records) };
    const { arms, freshness, profile } = await runArms(o, data, broker.brokers, python);
    const report: BenchReport = {
      date: new Date().toISOString(),
      machine: machine(),
      command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim().replace(/ --$/, ''),
      records: o.records,
      partitions: PARTITIONS,
      recordBytes: Math.round(data.bytes / data.records),
      produceSeconds: data.produceSeconds,
      totalSeconds: (Date.now() - t0) / 1000,
      arms,
      ...(freshness ? { freshness } : {}),
      ...(profile ? { profile } : {}),
      ...ratiosAndTargets(arms, freshness),
    };
    await writeReport(o.out, report);
    for (const t of report.targets) log(`${t.pass ? 'PASS' : 'FAIL'} ${t.name} (${t.detail})`);
    log(`report: ${path.join(o.out, 'report.md')}`);
    if (o.vectors) {
      // Beside the log arms, on the same broker: embeddings as JSON arrays and as base64.
      log('arm vectors (bench/vector-throughput.ts)');
      execFileSync(process.execPath, [path.join(__dirname, 'vector-throughput.js')], {
        stdio: ['ignore', 'ignore', 'inherit'],
        env: { ...process.env, KAFKA_BOOTSTRAP_SERVERS: broker.brokers.join(',') },
      });
      log(`report: ${path.join(BENCH, 'vectors.md')}`);
    }
  } finally {
    broker.stop();
  }
}

/** Report.json, report.svg and report.md in `out` (`--render`: the last two again from the first). */
async function writeReport(out: string, report: BenchReport): Promise<void> {
  await fsp.mkdir(out, { recursive: true });
  await fsp.writeFile(path.join(out, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
  const title = `kafka-lance bench, ${report.records.toLocaleString('en')} records, ${report.date.slice(0, 10)}`;
  await fsp.writeFile(path.join(out, 'report.svg'), plotSvg(report.arms, title));
  // Sections other benches wrote into the report (bench/many-tables.ts) stay.
  const previous = await fsp.readFile(path.join(out, 'report.md'), 'utf8').catch(() => '');
  const kept = keptSections(previous);
  const markdown = renderMarkdown(report, 'report.svg');
  await fsp.writeFile(
    path.join(out, 'report.md'),
    kept.length > 0 ? `${markdown.trimEnd()}\n\n${kept.join('\n')}` : markdown,
  );
}

/** Drains backlogs of each size in each mode and reports peak RSS. */
async function backlog(o: Options, brokers: string[]): Promise<void> {
  const rows: { gib: number; records: number; mode: string; result: ArmResult }[] = [];
  const perRecord = Buffer.byteLength(benchRecord(1));
  for (const gib of o.backlogGiB!) {
    const records = Math.round((gib * 1024 * MiB) / perRecord);
    let data = await produceDataset(brokers, `bench-logs-${records}`, records, PARTITIONS, log);
    if (data.reused) data = { ...data, bytes: await exactBytes(records) };
    for (const mode of ['buffered', 'streamed']) {
      log(`backlog ${gib} GiB, ${mode}`);
      const result = await runReplicaArm(
        {
          id: `e2e-${mode}`,
          label: `kafka-lance run, ${mode}`,
          topic: data.topic,
          records,
          bytes: data.bytes,
          brokers,
          extra: mode === 'streamed' ? { materializer: { pipelinePreparation: true } } : {},
        },
        log,
      );
      log(`  ${result.mibPerSecond} MiB/s, peak RSS ${result.peakRssMiB} MiB ${result.problems.join('; ')}`);
      rows.push({ gib, records, mode, result });
    }
  }
  const lines = [
    '# kafka-lance backlog drain: peak RSS vs backlog size',
    '',
    `Generated by \`npm run bench -- --backlog ${o.backlogGiB!.join(',')}\` on ${new Date().toISOString()} (${machine()}).`,
    '',
    '| backlog | records | mode | MiB/s | peak RSS MiB | rows check |',
    '| --- | --- | --- | --- | --- | --- |',
    ...rows.map(
      (r) =>
        `| ${r.gib} GiB | ${r.records.toLocaleString('en')} | ${r.mode} | ${r.result.mibPerSecond} | ${r.result.peakRssMiB} | ${r.result.problems.join('; ') || 'ok'} |`,
    ),
    '',
  ];
  for (const mode of ['buffered', 'streamed']) {
    const peaks = rows.filter((r) => r.mode === mode).map((r) => r.result.peakRssMiB);
    if (peaks.length >= 2) {
      const spread = Math.max(...peaks) / Math.min(...peaks) - 1;
      lines.push(
        `- ${spread <= 0.1 ? 'PASS' : 'FAIL'}: ${mode} peak RSS within 10 % across backlogs (${peaks.join(' / ')} MiB, ${(spread * 100).toFixed(0)} %)`,
      );
    }
  }
  await fsp.mkdir(o.out, { recursive: true });
  await fsp.writeFile(path.join(o.out, 'report-backlog.md'), `${lines.join('\n')}\n`);
  await fsp.writeFile(
    path.join(o.out, 'report-backlog.json'),
    `${JSON.stringify(
      rows.map((r) => ({ gib: r.gib, records: r.records, mode: r.mode, ...r.result })),
      null,
      2,
    )}\n`,
  );
  await fsp.writeFile(
    path.join(o.out, 'report-backlog.svg'),
    plotSvg(
      rows.map((r) => ({ ...r.result, id: `${r.gib} GiB ${r.mode}` })),
      'backlog drains',
    ),
  );
  log(`report: ${path.join(o.out, 'report-backlog.md')}`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
