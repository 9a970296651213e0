import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { loadConsumer, type ResolvedConsumer } from '../config';
import {
  CONSUMER,
  freePort,
  progressTicker,
  scrape,
  startEmbeddedBrokerIfNeeded,
  startReplica,
  stopReplica,
  sumHigh,
  waitReady,
} from './demo';
import { publishedInRanges, scanRun, type RunRanges, type RunScan } from './demo-summary';
import { CliError, DemoMismatchError, TableMissingError } from './errors';
import { formatInspect, inspect, type InspectReport } from './inspect';
import type { ReplicaProcess } from '../harness/replica-process';
import { ensureTopicsServed } from '../kafka/topic-ready';
import { connectAdmin, topicEnds, type PartitionEnds } from './kafka-admin';
import { openExistingTable } from './lance-read';
import { badCount } from './log-records';
import { KAFKA_LOCAL } from './paths';
import { produce } from './produce';

export interface ScaleDemoOptions {
  readonly seconds: number;
  readonly rate: number;
  readonly partitions: number;
  readonly replicas: number;
  readonly dataDir: string;
  /** Brokers to use; undefined: KAFKA_BOOTSTRAP_SERVERS, else the embedded broker. */
  readonly brokers: readonly string[] | undefined;
  readonly logLevel: string;
  readonly print: (line: string) => void;
  readonly progress: (line: string, final?: boolean) => void;
}

/** Its own topic and group, so that it never mixes with `kafka-lance demo`'s 6-partition app-logs. */
export const SCALE_TOPIC = 'app-logs-scale';
const SCALE_DLQ = `${SCALE_TOPIC}.dlq`;
const BAD_RATIO = 0.005;
/** A killed member holds its partitions this long: 10 s instead of 30 s keeps the demo short. */
const SESSION_TIMEOUT_MS = 10_000;
const SETTLE_TIMEOUT_MS = 120_000;

interface Member {
  readonly label: string;
  readonly dataDir: string;
  readonly logFile: string;
  readonly port: number;
  readonly replica: ReplicaProcess;
  readonly startedAt: number;
  readonly restartOf?: string;
  endedAt?: number;
  /** 'killed' by the demo, or the exit code of a graceful stop. */
  end?: 'killed' | number | null;
  last: { staged: number; published: number; dead: number; lag: number };
}

/**
 * Scale-out on one machine: N replicas of consumers/app-logs.ts (one data dir each,
 * one shared Lance table) on a P-partition topic while a producer writes; one replica
 * is SIGKILLed at a third of the run and restarted on its own data dir at two thirds
 * (a new group member that recovers the killed one's staging). Then all stop
 * gracefully, and the summary checks from the table and the group that every record
 * landed exactly once.
 */
export async function runScaleDemo(o: ScaleDemoOptions): Promise<void> {
  const dataDir = path.resolve(o.dataDir);
  const logsDir = path.join(dataDir, 'logs');
  mkdirSync(logsDir, { recursive: true });
  o.print(`Logs of this run: ${logsDir}`);
  const embedded = o.brokers ? { brokers: [...o.brokers], started: false } : startEmbeddedBrokerIfNeeded(o);
  const brokers = embedded.brokers;
  const started = Date.now();
  const at = (t = Date.now()) => `${((t - started) / 1000).toFixed(0)} s`;
  const kafka = new Kafka({
    clientId: 'kafka-lance-scale-demo',
    brokers,
    logLevel: logLevel.NOTHING,
    connectionTimeout: 3_000,
  });
  const admin = await connectAdmin(kafka, brokers);
  const members: Member[] = [];
  try {
    await ensureTopicsServed(admin, [
      { topic: SCALE_TOPIC, numPartitions: o.partitions },
      { topic: SCALE_DLQ, numPartitions: 1 },
    ]);
    const startEnds = (await topicEnds(admin, SCALE_TOPIC))!;
    const dlqStart = await topicEnds(admin, SCALE_DLQ);
    if (startEnds.length !== o.partitions) {
      throw new CliError(
        'BAD_ARGUMENT',
        `${SCALE_TOPIC} already has ${startEnds.length} partitions on ${brokers.join(',')}, not ${o.partitions}: pass --partitions ${startEnds.length}, or delete the topic.`,
      );
    }
    const definition = writeDefinition(dataDir);
    const consumerOf = (dir: string) => loadConsumer(definition, process.env, { brokers, dataDir: dir });
    const dirOf = (i: number) => path.join(dataDir, `replica-${i}`);
    const consumer = consumerOf(dirOf(1));

    const launch = async (label: string, dir: string, restartOf?: string): Promise<Member> => {
      const port = await freePort();
      const logFile = path.join(logsDir, `${label}.log`);
      const replica = startReplica(brokers, dir, port, o.logLevel, logFile, definition);
      const m: Member = {
        label,
        dataDir: dir,
        logFile,
        port,
        replica,
        startedAt: Date.now(),
        ...(restartOf ? { restartOf } : {}),
        last: { staged: 0, published: 0, dead: 0, lag: 0 },
      };
      members.push(m);
      await waitReady(replica, logFile);
      return m;
    };
    await Promise.all(Array.from({ length: o.replicas }, (_, i) => launch(`replica-${i + 1}`, dirOf(i + 1))));

    const count = o.seconds * o.rate;
    let produced = 0;
    const live = () => members.filter((m) => m.end === undefined);
    const events: string[] = [];
    const line = async () => {
      await Promise.all(
        live().map(async (m) => {
          m.last = await scrape(m.port).catch(() => m.last);
        }),
      );
      const sum = (k: keyof Member['last'], ms = members) => ms.reduce((n, m) => n + m.last[k], 0);
      return (
        `${at().padStart(5)}  produced ${produced}/${count}  replicas up ${live().length}  ` +
        `published ${sum('published')}  dead letters ${sum('dead')}  lag ${sum('lag', live())}` +
        (events.length > 0 ? `  (${events.join(', ')})` : '')
      );
    };
    const ticker = progressTicker(line, (l) => o.progress(l));
    // A third of the way in, SIGKILL the middle replica; at two thirds, restart it on its own data dir.
    const victim = members[Math.min(1, members.length - 1)]!;
    const produceStart = Date.now();
    const killed = sleep(o.seconds * 333).then(() => {
      victim.replica.signal('SIGKILL');
      victim.end = 'killed';
      victim.endedAt = Date.now();
      events.push(`${victim.label} killed at ${at()}`);
    });
    const restarted = killed
      .then(() => sleep(Math.max(0, produceStart + o.seconds * 667 - Date.now())))
      .then(() => {
        events.push(`replica-${o.replicas + 1} started at ${at()}`);
        return launch(`replica-${o.replicas + 1}`, victim.dataDir, victim.label);
      });
    // Awaited after production; a failure before then is reported by what failed first.
    restarted.catch(() => undefined);
    let ranges: RunRanges = new Map();
    let settled = 0;
    try {
      await produce({
        brokers,
        topic: SCALE_TOPIC,
        rate: o.rate,
        count,
        recordBytes: 0,
        badRatio: BAD_RATIO,
        partitions: o.partitions,
        onSent: (n) => (produced = n),
      });
      await restarted;
      const endEnds = (await topicEnds(admin, SCALE_TOPIC))!;
      ranges = rangesOf(startEnds, endEnds);
      // Every good record of the run published (the killed replica's staged parts too).
      const expected = produced - badCount(produced, BAD_RATIO);
      const deadline = Date.now() + SETTLE_TIMEOUT_MS;
      for (;;) {
        settled = await publishedInRanges(consumer, ranges, SCALE_TOPIC);
        if (settled >= expected || Date.now() > deadline || live().some((m) => !m.replica.alive)) break;
        await sleep(1_000);
      }
      ticker.stop();
      o.progress(
        `${at().padStart(5)}  produced ${produced}/${count}  in Lance ${settled}  (${events.join(', ')})`,
        true,
      );
    } finally {
      ticker.stop();
    }
    // Graceful stop of every live replica at once: each flushes, commits and finishes its publication.
    await Promise.all(
      live().map(async (m) => {
        m.end = await stopReplica(m.replica);
        m.endedAt = Date.now();
      }),
    );

    const dead = await distinctDeadLetters(kafka, admin, dlqStart, SCALE_TOPIC, startEnds);
    const scan = await scanTable(consumer, ranges);
    const reports = new Map<string, InspectReport>();
    for (const dir of [...new Set(members.map((m) => m.dataDir))])
      reports.set(dir, await inspect(consumerOf(dir)));
    o.print('');
    const problems = summarize(o.print, {
      seconds: (Date.now() - started) / 1000,
      started,
      produced,
      before: sumHigh(startEnds),
      broken: badCount(produced, BAD_RATIO),
      dead,
      scan,
      members,
      reports,
      victim,
      consumer,
      definition,
      brokers,
      dataDir,
    });
    if (problems.length > 0) throw new DemoMismatchError(problems);
  } finally {
    await Promise.all(members.filter((m) => m.end === undefined).map((m) => stopReplica(m.replica)));
    await admin.disconnect();
    if (embedded.started) {
      spawnSync(KAFKA_LOCAL, ['stop'], { stdio: 'ignore' });
      o.print('Stopped the embedded broker.');
    }
  }
}

/**
 * The consumer definition the replicas run: consumers/app-logs.ts on the demo's own
 * topic and group, every replica publishing into one table (`lance.uri`), and a
 * shorter session so that a killed member's partitions move sooner.
 */
function writeDefinition(dataDir: string): string {
  const file = path.join(dataDir, 'app-logs-scale.consumer.ts');
  writeFileSync(
    file,
    `// Written by \`kafka-lance scale-demo\`: consumers/app-logs.ts, all replicas into one table.
import base from ${JSON.stringify(CONSUMER)};

export default {
  ...base,
  name: ${JSON.stringify(SCALE_TOPIC)},
  topics: [${JSON.stringify(SCALE_TOPIC)}],
  deadLetter: { topic: ${JSON.stringify(SCALE_DLQ)} },
  lance: { uri: ${JSON.stringify(path.join(dataDir, 'lance'))} },
  sessionTimeoutMs: ${SESSION_TIMEOUT_MS},
  heartbeatIntervalMs: 1000,
};
`,
  );
  return file;
}

function rangesOf(start: readonly PartitionEnds[], end: readonly PartitionEnds[]): RunRanges {
  return new Map(
    end.map((e) => [
      e.partition,
      { from: start.find((s) => s.partition === e.partition)?.high ?? 0, to: e.high },
    ]),
  );
}

async function scanTable(consumer: ResolvedConsumer, ranges: RunRanges): Promise<RunScan> {
  const opened = await openExistingTable(consumer).catch((error: unknown) => {
    if (error instanceof TableMissingError) return undefined;
    throw error;
  });
  if (!opened) return { rows: 0, duplicates: 0, levels: new Map(), lastErrors: [] };
  try {
    return await scanRun(opened.table, ranges, SCALE_TOPIC);
  } finally {
    opened.close();
  }
}

interface DeadLetters {
  /** Records written to the DLQ during the run. */
  readonly written: number;
  /** Distinct source records among them (a record redelivered after the kill is dead-lettered again). */
  readonly distinct: number;
}

/**
 * Reads the DLQ (from its start: it is small) and counts this run's distinct source records
 * by their Connect headers: dead letters written during the run, of source records produced
 * during the run (a group left behind by an interrupted earlier run against the same broker
 * consumes, and dead-letters, that run's records too; they are not this run's).
 */
async function distinctDeadLetters(
  kafka: Kafka,
  admin: Awaited<ReturnType<typeof connectAdmin>>,
  startEnds: readonly PartitionEnds[] | undefined,
  sourceTopic: string,
  sourceStart: readonly PartitionEnds[],
): Promise<DeadLetters> {
  const fromSource = (p: number) => sourceStart.find((s) => s.partition === p)?.high ?? 0;
  const ends = (await topicEnds(admin, SCALE_DLQ)) ?? [];
  const from = (p: number) => startEnds?.find((s) => s.partition === p)?.high ?? 0;
  const todo = new Map(ends.filter((e) => e.high > from(e.partition)).map((e) => [e.partition, e.high]));
  const written = sumHigh(ends) - sumHigh(startEnds);
  if (todo.size === 0) return { written, distinct: 0 };
  const groupId = `kafka-lance-scale-demo-dlq-${Date.now()}`;
  const reader = kafka.consumer({ groupId });
  const seen = new Set<string>();
  await reader.connect();
  try {
    await reader.subscribe({ topic: SCALE_DLQ, fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      const timeout = setTimeout(
        () => reject(new Error(`could not read ${SCALE_DLQ} back within 60 s`)),
        60_000,
      );
      reader
        .run({
          autoCommit: false,
          eachMessage: ({ partition, message }) => {
            const offset = Number(message.offset);
            if (offset >= from(partition) && offset < (todo.get(partition) ?? 0)) {
              const h = (k: string) => message.headers?.[`__connect.errors.${k}`]?.toString() ?? '';
              const source = { partition: Number(h('partition')), offset: Number(h('offset')) };
              if (h('topic') === sourceTopic && source.offset >= fromSource(source.partition))
                seen.add(`${source.partition}/${source.offset}`);
            }
            if (offset + 1 >= (todo.get(partition) ?? 0)) todo.delete(partition);
            if (todo.size === 0) {
              clearTimeout(timeout);
              resolve();
            }
            return Promise.resolve();
          },
        })
        .catch(reject);
    });
  } finally {
    await reader.disconnect();
    await admin.deleteGroups([groupId]).catch(() => undefined);
  }
  return { written, distinct: seen.size };
}

interface ReplicaLog {
  joins: number;
  assigned: number[];
  publications: number;
  rows: number;
  recoveredPublications: number;
  staging?: { sealedParts: number; recoveredParts: number; tornParts: number };
}

/** What a replica did, from its JSON log lines. */
export function readReplicaLog(text: string, topic: string): ReplicaLog {
  const r: ReplicaLog = { joins: 0, assigned: [], publications: 0, rows: 0, recoveredPublications: 0 };
  for (const raw of text.split('\n')) {
    if (!raw.startsWith('{')) continue;
    let l: Record<string, unknown>;
    try {
      l = JSON.parse(raw) as Record<string, unknown>;
    } catch {
      continue;
    }
    if (l.event === 'kafka.join') {
      r.joins++;
      r.assigned = ((l.assigned as [string, number][] | undefined) ?? [])
        .filter(([t]) => t === topic)
        .map(([, p]) => p)
        .sort((a, b) => a - b);
    } else if (l.event === 'publication') {
      r.publications++;
      r.rows += Number(l.rows ?? 0);
    } else if (l.event === 'publication.recovery') {
      r.recoveredPublications++;
    } else if (l.event === 'staging.recovery') {
      r.staging = {
        sealedParts: Number(l.sealedParts ?? 0),
        recoveredParts: Number(l.recoveredParts ?? 0),
        tornParts: Number(l.tornParts ?? 0),
      };
    }
  }
  return r;
}

interface SummaryInput {
  readonly seconds: number;
  readonly started: number;
  readonly produced: number;
  /** Records of the topic before this run (earlier runs against the same broker). */
  readonly before: number;
  readonly broken: number;
  readonly dead: DeadLetters;
  readonly scan: RunScan;
  readonly members: readonly Member[];
  readonly reports: ReadonlyMap<string, InspectReport>;
  readonly victim: Member;
  readonly consumer: ResolvedConsumer;
  readonly definition: string;
  readonly brokers: readonly string[];
  readonly dataDir: string;
}

const fmt = (x: number) => x.toLocaleString('en-US');

/** Prints the summary; returns what does not add up. */
function summarize(print: (line: string) => void, s: SummaryInput): string[] {
  const problems: string[] = [];
  const rel = (dir: string) => path.relative(s.dataDir, dir) || '.';
  const t = (ms: number | undefined) => `${(((ms ?? Date.now()) - s.started) / 1000).toFixed(0)} s`;
  print(`Scale demo finished in ${s.seconds.toFixed(0)} s.`);
  print(
    `Replicas      group ${s.consumer.groupId} on ${SCALE_TOPIC} (${s.reports.values().next().value?.partitions.length ?? 0} partitions), one table ${s.consumer.table}`,
  );
  for (const m of s.members) {
    const log = readReplicaLog(safeRead(m.logFile), SCALE_TOPIC);
    const end =
      m.end === 'killed'
        ? 'killed (SIGKILL)'
        : m.end === 0
          ? 'stopped (SIGTERM), exit 0'
          : `exit ${String(m.end)}`;
    const held = log.assigned.length > 0 ? log.assigned.join(',') : 'none';
    print(
      `  ${m.label.padEnd(10)} data ${rel(m.dataDir).padEnd(9)} ${t(m.startedAt).padStart(5)} – ${t(m.endedAt).padEnd(5)} ${end.padEnd(26)}` +
        ` joins ${log.joins}  publications ${log.publications} (${fmt(log.rows)} rows)  ` +
        `${m.end === 'killed' ? 'held when killed' : 'held at the end'} ${held}`,
    );
    if (m.restartOf) {
      const st = log.staging;
      print(
        `  ${''.padEnd(10)} restart of ${m.restartOf} on its data dir: recovered ${plural(st?.sealedParts ?? 0, 'staged part')}` +
          ` (${st?.recoveredParts ?? 0} open ones sealed, ${st?.tornParts ?? 0} torn tails dropped),` +
          ` ${plural(log.recoveredPublications, 'interrupted publication')} finished`,
      );
    }
    if (m.end !== 'killed' && m.end !== 0)
      problems.push(`${m.label} exited with code ${String(m.end)} on SIGTERM (log: ${m.logFile})`);
    if (m.end !== 'killed' && log.joins === 0) problems.push(`${m.label} never joined the group`);
  }
  const held = s.members
    .filter((m) => m.end !== 'killed')
    .flatMap((m) => readReplicaLog(safeRead(m.logFile), SCALE_TOPIC).assigned);
  const partitions = s.reports.values().next().value?.partitions.length ?? 0;
  print(
    `Assignment    at the end ${held.length} partitions held by the ${s.members.filter((m) => m.end !== 'killed').length} live replicas, ` +
      `${new Set(held).size} distinct of ${partitions}`,
  );
  const expected = s.produced - s.dead.distinct;
  print(`Produced      ${fmt(s.produced)} log lines to ${SCALE_TOPIC} (${fmt(s.broken)} broken on purpose)`);
  print(
    `Dead letters  ${fmt(s.dead.distinct)} records in ${SCALE_DLQ}` +
      (s.dead.written > s.dead.distinct
        ? ` (${fmt(s.dead.written)} written: ${fmt(s.dead.written - s.dead.distinct)} again after the kill, redelivered records)`
        : ''),
  );
  print(
    `Check         ${fmt(s.scan.rows)} rows of this run in Lance = ${fmt(s.produced)} produced - ${fmt(s.dead.distinct)} dead letters: ${s.scan.rows === expected ? 'yes' : 'NO'}`,
  );
  print(
    `Duplicates    ${s.scan.duplicates} rows share a (_topic, _partition, _offset): ${s.scan.duplicates === 0 ? 'none' : 'NO'}`,
  );
  if (s.scan.rows !== expected)
    problems.push(
      `${s.scan.rows} rows of this run in Lance, expected ${s.produced} produced - ${s.dead.distinct} dead letters = ${expected}`,
    );
  if (s.dead.distinct !== s.broken)
    problems.push(`${s.dead.distinct} distinct dead letters, but ${s.broken} lines were broken on purpose`);
  if (s.scan.duplicates > 0)
    problems.push(`${s.scan.duplicates} duplicate (_topic, _partition, _offset) rows`);

  const report = s.reports.get(s.victim.dataDir)!;
  const behind = report.partitions.filter((p) => p.committed !== p.logEnd);
  print(
    `Committed     ${report.partitions.length - behind.length} of ${report.partitions.length} partitions committed at the log end: ${behind.length === 0 ? 'yes' : 'NO'}`,
  );
  for (const p of behind)
    problems.push(`${p.topic}[${p.partition}]: committed ${String(p.committed)}, log end ${p.logEnd}`);
  for (const [dir, r] of s.reports) {
    const left =
      r.staging.open.count + r.staging.sealed.count + r.publications.planned + r.publications.writing;
    print(
      `Staging       ${rel(dir).padEnd(9)} ${r.staging.open.count} open, ${r.staging.sealed.count} sealed, ` +
        `${r.publications.planned + r.publications.writing} unfinished publications: ${left === 0 ? 'all published' : 'NO'}`,
    );
    if (left > 0) problems.push(`${dir} still holds staged parts or unfinished publications`);
  }
  print('');
  if (s.before > 0)
    print(
      `Note          ${SCALE_TOPIC} held ${fmt(s.before)} records before this run (earlier runs, in the tables of their own --data-dir): the Lance rows below are this data dir's only.`,
    );
  print(
    `kafka-lance inspect -c ${s.definition} --data-dir ${s.victim.dataDir} --brokers ${s.brokers.join(',')}`,
  );
  for (const l of formatInspect(report)) print(`  ${l}`);
  print('');
  print(`Logs          ${path.join(s.dataDir, 'logs')}`);
  print(problems.length === 0 ? 'Every record once: yes' : 'Every record once: NO');
  return problems;
}

function safeRead(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const plural = (count: number, noun: string): string => `${count} ${noun}${count === 1 ? '' : 's'}`;
