import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import type { ResolvedConsumer } from '../config';
import type { RunScan } from './demo-summary';
import { formatInspect, type InspectReport } from './inspect';
import { plural } from './plural';
import type { DeadLetters } from './scale-demo-readback';
import type { Member } from './scale-demo-replicas';
import { SCALE_DLQ, SCALE_TOPIC } from './scale-demo-topic';

/**
 * The scale demo's verdict: per replica what its log says it did, then the checks that
 * every record landed exactly once, each line ending in yes or NO.
 */

export interface ReplicaLog {
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

export interface SummaryInput {
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
export function summarize(print: (line: string) => void, s: SummaryInput): string[] {
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
