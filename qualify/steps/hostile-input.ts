import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { CompressionTypes } from 'kafkajs';
import { Campaign, TABLE } from '../support/campaign';
import {
  HOSTILE_FORMATS,
  jsonTopic,
  volumes,
  type HostileFormat,
  type HostileRecord,
  type HostileTopic,
  type Register,
  type Volumes,
} from '../support/hostile-records';
import { avroTopic, jsonSchemaTopic, protobufTopic } from '../support/hostile-registry-records';
import { ensureIndependentReader, readIndependently, PYLANCE } from '../support/independent-reader';
import { commitLag, logRecords } from '../support/log-offsets';
import { ROOT } from '../support/paths';
import { Random, sleep } from '../support/random';
import { settle } from '../support/settle';
import { PATIENT_PRODUCER_RETRY } from '../support/topics';
import type { QualifyContext, QualifyStep, QualifyStepReport } from '../step';

const MiB = 1024 * 1024;
/** A record batch this big or more is sent alone (the broker takes 1 MiB a batch). */
const CHUNK_BYTES = 600_000;
/** "No partition's lag stays above 0 for more than a minute after production stops." */
const LAG_LIMIT_MS = 60_000;

/**
 * Qualification step: hostile input. For each of JSON, Avro, Protobuf and JSON Schema, a
 * real replica (the compiled entry point, its heap capped from the StatefulSet's memory
 * limit) consumes a topic where good records are mixed, in a seeded order, with what
 * anyone allowed to produce or to register a schema can send: schema-id churn, schema
 * bombs (nested, recursive, wide, huge enums and unions), header floods, deep nesting,
 * giant strings and arrays, NaN and Infinity, wrong-length vectors, invalid UTF-8, keys
 * that change type, records at the broker's maximum size. It passes when the replica
 * never exits, its peak RSS stays under the limit, every partition's committed offset
 * reaches the log end within a minute of the end of production, and every record is a
 * row (read back by pylance) or a dead letter with a reason, the good ones rows.
 */
export const step: QualifyStep = {
  name: 'hostile-input',
  title: 'Hostile input: nothing a producer writes stops a partition or exhausts a replica',
  needs: ['schema-registry'],
  run: (ctx) => runHostileInput(ctx),
};

interface FormatOutcome {
  readonly format: HostileFormat;
  readonly records: number;
  readonly bytes: number;
  readonly rows: number;
  readonly deadLetters: number;
  readonly reasons: Record<string, number>;
  readonly kinds: Map<string, { rows: number; deadLetters: number; reasons: Set<string> }>;
  readonly peakRssBytes: number | undefined;
  readonly lagSeconds: number | undefined;
  readonly skipped: readonly string[];
  /** Error-level lines the replica logged (not failures by themselves: bad input may be logged so). */
  readonly errors: readonly string[];
  readonly problems: readonly string[];
}

async function runHostileInput(ctx: QualifyContext): Promise<QualifyStepReport> {
  const url = ctx.schemaRegistry?.url;
  if (!url) throw new Error('hostile-input: the runner provided no Schema Registry');
  await ensureIndependentReader((line) => ctx.log(line));
  const limit = statefulSetMemoryLimit();
  const outcomes: FormatOutcome[] = [];
  for (const format of HOSTILE_FORMATS) {
    // A topic that fails outright is reported as such; the other formats still run.
    outcomes.push(
      await runFormat(ctx, format, url, limit).catch((error: unknown) => failedFormat(format, error)),
    );
  }
  const problems = outcomes.flatMap((o) => o.problems.map((p) => `${o.format}: ${p}`));
  const passed = problems.length === 0;
  const total = (f: (o: FormatOutcome) => number) => outcomes.reduce((n, o) => n + f(o), 0);
  const peak = Math.max(...outcomes.map((o) => o.peakRssBytes ?? 0));
  const exited = outcomes.filter((o) => o.problems.some((p) => p.startsWith('the replica exited'))).length;
  const lag = Math.max(...outcomes.map((o) => o.lagSeconds ?? Number.POSITIVE_INFINITY));
  return {
    passed,
    summary:
      `${total((o) => o.records)} records (${(total((o) => o.bytes) / MiB).toFixed(1)} MiB) on 4 topics (JSON, Avro, Protobuf, JSON Schema), good ones mixed with hostile ones, seed ${ctx.seed}; ` +
      `a replica per topic with the StatefulSet's ${(limit / MiB).toFixed(0)} MiB limit: ${exited === 0 ? 'none' : exited} exited, peak RSS ${(peak / MiB).toFixed(0)} MiB, ` +
      `committed = log end ${Number.isFinite(lag) ? `${lag.toFixed(1)} s at most` : 'not within a minute'} after production; ${total((o) => o.rows)} rows (pylance) + ${total((o) => o.deadLetters)} dead letters with a reason. ` +
      (passed ? 'Passed.' : `FAILED: ${problems.join('; ')}`),
    details: details(outcomes, ctx.seed, limit),
  };
}

async function runFormat(
  ctx: QualifyContext,
  format: HostileFormat,
  url: string,
  limit: number,
): Promise<FormatOutcome> {
  const random = new Random(ctx.seed + HOSTILE_FORMATS.indexOf(format));
  const workDir = path.join(ctx.workDir, format);
  const register = registrar(url);
  const topic = await hostileTopic(
    format,
    random,
    volumes(ctx.short),
    register,
    `hostile-${ctx.seed}-${Date.now().toString(36)}`,
  );
  const c = new Campaign({
    context: { ...ctx, workDir },
    name: `hostile-${format}`,
    partitions: 2,
    replicas: 1,
    sessionTimeoutMs: 10_000,
    definition: { ...topic.definition, ...(format === 'json' ? {} : { schemaRegistry: { url } }) },
    // The heap a container of the StatefulSet's limit leaves the replica (the rest: native memory, Arrow, Lance).
    env: { NODE_OPTIONS: `--max-old-space-size=${Math.floor((limit * 0.75) / MiB)} --max-semi-space-size=4` },
  });
  const problems: string[] = [];
  const exits: string[] = [];
  const errors: string[] = [];
  try {
    await c.setUp();
    const slot = c.slots[0]!;
    let stopping = false;
    void slot.run.exited.then((e) => {
      if (!stopping) exits.push(`the replica exited on its own (code ${e.code}, signal ${e.signal})`);
    });
    c.log(`${format}: producing ${topic.leading.length * 2 + topic.records.length} records`);
    const produced = await produce(c, topic.leading, topic.records, random);
    c.log(
      `${format}: produced ${produced.records} records, ${(produced.bytes / MiB).toFixed(1)} MiB; waiting for the commits`,
    );
    const lagSeconds = await lagCleared(c);
    if (lagSeconds === undefined)
      problems.push(
        `a partition's committed offset was behind its log end a minute after production: ${(await commitLag(c)).join('; ')}`,
      );
    const settled = await settle(c, 120_000);
    if (settled.stalled) problems.push(settled.stalled);
    const peakRssBytes = peakRss(slot.run.pid);
    stopping = true;
    await c.stopAll();
    const exit = await slot.run.exited;
    if (exit.code !== 0)
      problems.push(`the replica's stop ended with code ${exit.code} (signal ${exit.signal})`);
    problems.push(...exits);
    errors.push(...c.errorEvents().slice(0, 5));
    if (peakRssBytes === undefined) problems.push('peak RSS unreadable');
    else if (peakRssBytes >= limit)
      problems.push(
        `peak RSS ${(peakRssBytes / MiB).toFixed(0)} MiB, the limit is ${(limit / MiB).toFixed(0)} MiB`,
      );
    const fates = await fatesOf(c, produced.placed, problems);
    return {
      format,
      records: produced.records,
      bytes: produced.bytes,
      ...fates,
      peakRssBytes,
      lagSeconds,
      skipped: topic.skipped,
      errors,
      problems,
    };
  } finally {
    await c.close();
  }
}

function failedFormat(format: HostileFormat, error: unknown): FormatOutcome {
  return {
    format,
    records: 0,
    bytes: 0,
    rows: 0,
    deadLetters: 0,
    reasons: {},
    kinds: new Map(),
    peakRssBytes: undefined,
    lagSeconds: undefined,
    skipped: [],
    errors: [],
    problems: [`the topic's run failed: ${String(error).slice(0, 400)}`],
  };
}

function hostileTopic(
  format: HostileFormat,
  random: Random,
  v: Volumes,
  register: Register,
  prefix: string,
): Promise<HostileTopic> {
  switch (format) {
    case 'json':
      return Promise.resolve(jsonTopic(random, v));
    case 'avro':
      return avroTopic(random, v, register, prefix);
    case 'protobuf':
      return protobufTopic(random, v, register, prefix);
    case 'json-schema':
      return jsonSchemaTopic(random, v, register, prefix);
  }
}

/** Confluent's POST /subjects/<subject>/versions. */
function registrar(url: string): Register {
  return async (subject, schemaType, schema) => {
    const response = await fetch(`${url}/subjects/${encodeURIComponent(subject)}/versions`, {
      method: 'POST',
      headers: { 'content-type': 'application/vnd.schemaregistry.v1+json' },
      body: JSON.stringify({ schema, ...(schemaType === 'AVRO' ? {} : { schemaType }) }),
    });
    const body = await response.text();
    if (!response.ok) throw new Error(`${response.status} ${body.slice(0, 200)}`);
    return (JSON.parse(body) as { id: number }).id;
  };
}

interface Placed {
  readonly record: HostileRecord;
  readonly partition: number;
  readonly offset: number;
}

/**
 * Every partition gets the leading records first, then the shuffled ones spread over
 * the partitions; each partition's records go in order, in batches under the broker's
 * limit, from an idempotent producer, so that each record's offset is known.
 */
async function produce(
  c: Campaign,
  leading: readonly HostileRecord[],
  records: readonly HostileRecord[],
  random: Random,
): Promise<{ records: number; bytes: number; placed: Placed[] }> {
  const byPartition: HostileRecord[][] = [[...leading], [...leading]];
  for (const r of records) byPartition[random.int(0, 1)]!.push(r);
  const producer = c.kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    retry: PATIENT_PRODUCER_RETRY,
  });
  await producer.connect();
  const placed: Placed[] = [];
  let bytes = 0;
  try {
    for (const [partition, list] of byPartition.entries()) {
      let chunk: HostileRecord[] = [];
      let chunkBytes = 0;
      const flush = async () => {
        if (chunk.length === 0) return;
        const [meta] = await producer.send({
          topic: c.topic,
          acks: -1,
          compression: CompressionTypes.None,
          messages: chunk.map((r) => ({
            partition,
            key: r.key,
            value: r.value,
            ...(r.headers ? { headers: r.headers } : {}),
          })),
        });
        const base = Number(meta!.baseOffset);
        chunk.forEach((record, i) => placed.push({ record, partition, offset: base + i }));
        chunk = [];
        chunkBytes = 0;
      };
      for (const r of list) {
        const size = sizeOf(r);
        bytes += size;
        if (chunkBytes + size > CHUNK_BYTES) await flush();
        chunk.push(r);
        chunkBytes += size;
      }
      await flush();
    }
  } finally {
    await producer.disconnect();
  }
  // An idempotent producer writes each record once: the log ends must be the counts.
  const log = await logRecords(c);
  for (const [partition, list] of byPartition.entries())
    if (log.ends.get(partition)?.high !== list.length)
      throw new Error(
        `partition ${partition} holds ${log.ends.get(partition)?.high} records, ${list.length} were sent`,
      );
  return { records: placed.length, bytes, placed };
}

function sizeOf(r: HostileRecord): number {
  let n = (r.key?.length ?? 0) + (r.value?.length ?? 0) + 32;
  for (const [k, v] of Object.entries(r.headers ?? {}))
    n += Array.isArray(v) ? v.reduce((m, x) => m + x.length + k.length + 4, 0) : k.length + v.length + 4;
  return n;
}

/** Seconds from now until every committed offset is the log end, or undefined after LAG_LIMIT_MS. */
async function lagCleared(c: Campaign): Promise<number | undefined> {
  const started = Date.now();
  while (Date.now() - started <= LAG_LIMIT_MS) {
    const lag = await commitLag(c).catch(() => ['unreadable']);
    if (lag.length === 0) return (Date.now() - started) / 1000;
    await sleep(1_000);
  }
  return undefined;
}

/** The peak resident set of a process (its threads included), from /proc. */
function peakRss(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /^VmHWM:\s+(\d+) kB/m.exec(status)?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

/** The memory limit of the replica container in deploy/k8s/statefulset.yaml, in bytes. */
export function statefulSetMemoryLimit(): number {
  const yaml = readFileSync(path.join(ROOT, 'deploy/k8s/statefulset.yaml'), 'utf8');
  const match = /limits:\s*\n(?:\s+cpu:.*\n)?\s+memory:\s*(\d+)(Mi|Gi)/.exec(yaml);
  if (!match) throw new Error('deploy/k8s/statefulset.yaml has no container memory limit');
  return Number(match[1]) * (match[2] === 'Gi' ? 1024 : 1) * MiB;
}

/**
 * What became of every record: its dead letter (with its reason) from the replica's
 * dead-letter file, else a row, which pylance must find exactly (no row missing, none at a
 * dead letter's offset, no duplicate); each record's kind held to its fate.
 */
async function fatesOf(
  c: Campaign,
  placed: readonly Placed[],
  problems: string[],
): Promise<Pick<FormatOutcome, 'rows' | 'deadLetters' | 'reasons' | 'kinds'>> {
  const dead = new Map<string, string>();
  const name = path.basename(c.definitionFile, '.json');
  for (const slot of c.slots) {
    const file = path.join(slot.dataDir, 'dead-letter', `${name}.jsonl`);
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (!line.startsWith('{')) continue;
      const l = JSON.parse(line) as {
        topic: string;
        partition: number;
        offset: string | number;
        reason?: string;
      };
      if (l.topic !== c.topic) continue;
      if (typeof l.reason !== 'string' || l.reason === '')
        problems.push(`the dead letter at ${l.partition}/${l.offset} has no reason`);
      dead.set(`${l.partition}/${Number(l.offset)}`, l.reason ?? '');
    }
  }
  const expected: Record<string, number[]> = {};
  const reasons: Record<string, number> = {};
  const kinds = new Map<string, { rows: number; deadLetters: number; reasons: Set<string> }>();
  let rows = 0;
  for (const p of placed) {
    const reason = dead.get(`${p.partition}/${p.offset}`);
    const kind = kinds.get(p.record.kind) ?? { rows: 0, deadLetters: 0, reasons: new Set<string>() };
    kinds.set(p.record.kind, kind);
    if (reason === undefined) {
      (expected[String(p.partition)] ??= []).push(p.offset);
      rows += 1;
      kind.rows += 1;
      if (p.record.fate === 'dead-letter')
        problems.push(`a "${p.record.kind}" record (${p.partition}/${p.offset}) is a row, not a dead letter`);
    } else {
      reasons[reason] = (reasons[reason] ?? 0) + 1;
      kind.deadLetters += 1;
      kind.reasons.add(reason);
      if (p.record.fate === 'row')
        problems.push(
          `a "${p.record.kind}" record (${p.partition}/${p.offset}) is a dead letter (${reason}), not a row`,
        );
    }
  }
  const expectedFile = path.join(c.o.context.workDir, 'expected-rows.json');
  writeFileSync(expectedFile, JSON.stringify(expected));
  const dataset = path.join(c.lanceUri, `${TABLE}.lance`);
  if (!existsSync(dataset)) {
    if (rows > 0) problems.push(`no table: ${rows} records are neither rows nor dead letters`);
    return { rows: 0, deadLetters: dead.size, reasons, kinds };
  }
  const reading = await readIndependently(dataset, {}, c.topic, expectedFile);
  if (reading.rows !== rows)
    problems.push(`pylance reads ${reading.rows} rows, ${rows} records are not dead letters`);
  if ((reading.missing ?? 0) > 0)
    problems.push(
      `pylance: ${reading.missing} records neither rows nor dead letters (${JSON.stringify(reading.missingExamples)})`,
    );
  if ((reading.unexpected ?? 0) > 0)
    problems.push(`pylance: ${reading.unexpected} rows at dead letters' offsets`);
  if (reading.duplicates > 0) problems.push(`pylance: ${reading.duplicates} duplicate rows`);
  return { rows: reading.rows, deadLetters: dead.size, reasons, kinds };
}

function details(outcomes: readonly FormatOutcome[], seed: number, limit: number): string[] {
  const lines = [
    `Seed ${seed}; the replica's limit ${(limit / MiB).toFixed(0)} MiB (deploy/k8s/statefulset.yaml), its heap capped at 75 % of it; rows read back with ${PYLANCE}.`,
    '',
    '| topic | records | MiB | rows | dead letters by reason | peak RSS | lag cleared after | problems |',
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
    ...outcomes.map(
      (o) =>
        `| ${o.format} | ${o.records} | ${(o.bytes / MiB).toFixed(1)} | ${o.rows} | ${Object.entries(
          o.reasons,
        )
          .map(([r, n]) => `${r} ${n}`)
          .join(
            ', ',
          )} | ${o.peakRssBytes === undefined ? '?' : `${(o.peakRssBytes / MiB).toFixed(0)} MiB`} | ${
          o.lagSeconds === undefined ? '> 60 s' : `${o.lagSeconds.toFixed(1)} s`
        } | ${o.problems.length === 0 ? 'none' : o.problems.slice(0, 5).join('; ')} |`,
    ),
    '',
    '| topic | kind | rows | dead letters (reasons) |',
    '| --- | --- | --- | --- |',
    ...outcomes.flatMap((o) =>
      [...o.kinds].map(
        ([kind, k]) =>
          `| ${o.format} | ${kind} | ${k.rows} | ${k.deadLetters} (${[...k.reasons].join(', ')}) |`,
      ),
    ),
  ];
  const notes = [
    ...outcomes.flatMap((o) => o.skipped.map((s) => `- ${o.format}: not sent, ${s}`)),
    ...outcomes.flatMap((o) => o.errors.map((e) => `- ${o.format}: the replica logged an error: ${e}`)),
  ];
  return notes.length > 0 ? [...lines, '', ...notes] : lines;
}
