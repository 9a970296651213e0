import { mkdirSync } from 'node:fs';
import * as path from 'node:path';
import type { Admin } from 'kafkajs';
import { loadConsumer, type ResolvedConsumer } from '../config';
import { progressTicker, startEmbeddedBrokerIfNeeded, sumHigh } from './demo';
import { closeDemoBroker, demoKafka } from './demo-broker';
import { publishedInRanges, type RunRanges } from './demo-summary';
import { DemoMismatchError } from './errors';
import { inspect, type InspectReport } from './inspect';
import { connectAdmin, topicEnds, type PartitionEnds } from './kafka-admin';
import { badCount } from './log-records';
import { produce } from './produce';
import { distinctDeadLetters, scanTable } from './scale-demo-readback';
import { ScaleReplicas, type Member } from './scale-demo-replicas';
import { BAD_RATIO, SCALE_TOPIC, prepareTopics, rangesOf, writeDefinition } from './scale-demo-topic';
import { summarize } from './scale-demo-verdict';

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

const SETTLE_TIMEOUT_MS = 120_000;

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
  const kafka = demoKafka('kafka-lance-scale-demo', brokers);
  const admin = await connectAdmin(kafka, brokers);
  let replicas: ScaleReplicas | undefined;
  try {
    const topics = await prepareTopics(admin, o.partitions, brokers);
    const definition = writeDefinition(dataDir);
    const consumerOf = (dir: string) => loadConsumer(definition, process.env, { brokers, dataDir: dir });
    const dirOf = (i: number) => path.join(dataDir, `replica-${i}`);
    const consumer = consumerOf(dirOf(1));
    const group = new ScaleReplicas({ brokers, logsDir, logLevel: o.logLevel, definition });
    replicas = group;
    await Promise.all(
      Array.from({ length: o.replicas }, (_, i) => group.launch(`replica-${i + 1}`, dirOf(i + 1))),
    );

    const { produced, ranges, victim } = await produceThroughKillAndRestart(o, {
      brokers,
      admin,
      group,
      consumer,
      startEnds: topics.source,
      at,
    });
    await group.stopLive();

    const dead = await distinctDeadLetters(kafka, admin, topics.deadLetters, SCALE_TOPIC, topics.source);
    const scan = await scanTable(consumer, ranges);
    const reports = new Map<string, InspectReport>();
    for (const dir of [...new Set(group.members.map((m) => m.dataDir))])
      reports.set(dir, await inspect(consumerOf(dir)));
    o.print('');
    const problems = summarize(o.print, {
      seconds: (Date.now() - started) / 1000,
      started,
      produced,
      before: sumHigh(topics.source),
      broken: badCount(produced, BAD_RATIO),
      dead,
      scan,
      members: group.members,
      reports,
      victim,
      consumer,
      definition,
      brokers,
      dataDir,
    });
    if (problems.length > 0) throw new DemoMismatchError(problems);
  } finally {
    await replicas?.stopRemaining();
    await closeDemoBroker(admin, embedded, o.print);
  }
}

interface RunContext {
  readonly brokers: string[];
  readonly admin: Admin;
  readonly group: ScaleReplicas;
  readonly consumer: ResolvedConsumer;
  /** The topic's log ends before this run. */
  readonly startEnds: readonly PartitionEnds[];
  /** Seconds since the demo started, as the progress line shows them. */
  readonly at: (t?: number) => string;
}

/**
 * Produces `seconds × rate` lines with a progress line; a third of the way in, SIGKILLs
 * the middle replica, at two thirds restarts it on its own data dir; then waits until
 * every good line of the run is in Lance (or a replica exits, or 2 minutes pass).
 */
async function produceThroughKillAndRestart(
  o: ScaleDemoOptions,
  c: RunContext,
): Promise<{ produced: number; ranges: RunRanges; victim: Member }> {
  const { group, at } = c;
  const members = group.members;
  const count = o.seconds * o.rate;
  let produced = 0;
  const events: string[] = [];
  const line = async () => {
    await group.refresh();
    const sum = (k: keyof Member['last'], ms = members) => ms.reduce((n, m) => n + m.last[k], 0);
    return (
      `${at().padStart(5)}  produced ${produced}/${count}  replicas up ${group.live().length}  ` +
      `published ${sum('published')}  dead letters ${sum('dead')}  lag ${sum('lag', group.live())}` +
      (events.length > 0 ? `  (${events.join(', ')})` : '')
    );
  };
  const ticker = progressTicker(line, (l) => o.progress(l));
  const victim = members[Math.min(1, members.length - 1)]!;
  const produceStart = Date.now();
  const killed = sleep(o.seconds * 333).then(() => {
    group.kill(victim);
    events.push(`${victim.label} killed at ${at()}`);
  });
  const restarted = killed
    .then(() => sleep(Math.max(0, produceStart + o.seconds * 667 - Date.now())))
    .then(() => {
      events.push(`replica-${o.replicas + 1} started at ${at()}`);
      return group.launch(`replica-${o.replicas + 1}`, victim.dataDir, victim.label);
    });
  // Awaited after production; a failure before then is reported by what failed first.
  restarted.catch(() => undefined);
  let ranges: RunRanges = new Map();
  let settled = 0;
  try {
    await produce({
      brokers: c.brokers,
      topic: SCALE_TOPIC,
      rate: o.rate,
      count,
      recordBytes: 0,
      badRatio: BAD_RATIO,
      partitions: o.partitions,
      onSent: (n) => (produced = n),
    });
    await restarted;
    const endEnds = (await topicEnds(c.admin, SCALE_TOPIC))!;
    ranges = rangesOf(c.startEnds, endEnds);
    // Every good record of the run published (the killed replica's staged parts too).
    const expected = produced - badCount(produced, BAD_RATIO);
    const deadline = Date.now() + SETTLE_TIMEOUT_MS;
    for (;;) {
      settled = await publishedInRanges(c.consumer, ranges, SCALE_TOPIC);
      if (settled >= expected || Date.now() > deadline || group.live().some((m) => !m.replica.alive)) break;
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
  return { produced, ranges, victim };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
