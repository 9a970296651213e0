import * as path from 'node:path';
import { silentLogger } from '../../src/common/logger';
import { TopicIds } from '../../src/kafka/protocol/topic-ids';
import { Campaign } from '../support/campaign';
import type { Incarnations } from '../support/expected-offsets';
import { finalCheck } from '../support/final-check';
import type { FinalCheck } from '../support/final-check-result';
import { settle } from '../support/settle';
import { checksummedValue } from '../support/producer';
import { connectedProducer, sendToPartition, type LogRecord } from '../support/gapped-topics';
import { sleep } from '../support/random';
import type { ReplicaEvent } from '../support/replica';
import { campaignDetails } from '../support/report-lines';
import { createTopicReady } from '../support/topics';
import type { QualifyContext, QualifyStep, QualifyStepReport } from '../step';

const PAYLOAD_CHARS = 1_000;
const PER_SEND = 250;

type Mode = 'staged' | 'published';

interface Phase {
  readonly name: string;
  readonly topicId: string;
  readonly records: readonly LogRecord[];
}

interface RunResult {
  readonly mode: Mode;
  readonly passed: boolean;
  readonly summary: string;
  readonly details: string[];
}

/**
 * A topic deleted and recreated under the same name (section "A topic recreated under
 * the same name" of DESIGN.md): its offsets start at 0 again, so the new records have the
 * (topic, partition, offset) of rows already in the table, and only `_topic_id` tells
 * them apart. Phase A: N records, 2 replicas publish them and stop (SIGTERM). Phase B:
 * the topic is deleted and created again with the same partitions, M < N records are
 * produced (every offset overlaps an old row's), the replicas restart on their data dirs.
 * Phase C (full run): the topic is deleted and created again while the replicas consume,
 * more records are produced at once: the replicas must notice
 * (`kafka.topic.recreated-while-consumed`) and rejoin. Checks after each phase: every
 * record of every incarnation is a row under its own topic id exactly once (the final
 * check per incarnation, the ids asked from the broker with Metadata v10+), no replica
 * exited before it was stopped and none exited non-zero, every claim after a recreation
 * is for the new id, committed = log end of the new incarnation, clean data dirs. The
 * full run does it all twice: commitAfter 'staged', then 'published' into a table of its
 * own.
 */
export const step: QualifyStep = {
  name: 'recreated',
  title: 'A topic deleted and recreated under the same name',
  async run(ctx: QualifyContext): Promise<QualifyStepReport> {
    const modes: Mode[] = ctx.short ? ['staged'] : ['staged', 'published'];
    const results: RunResult[] = [];
    for (const mode of modes) results.push(await runMode(ctx, mode));
    const passed = results.every((r) => r.passed);
    return {
      passed,
      summary: results.map((r) => r.summary).join(' ') + (passed ? ' Passed.' : ''),
      details: results.flatMap((r) => [`#### commitAfter '${r.mode}'`, '', ...r.details, '']),
    };
  },
};

async function runMode(parent: QualifyContext, mode: Mode): Promise<RunResult> {
  const ctx: QualifyContext = {
    brokers: parent.brokers,
    broker: parent.broker,
    workDir: path.join(parent.workDir, mode),
    short: parent.short,
    seed: parent.seed,
    log: (line) => parent.log(`[${mode}] ${line}`),
  };
  const partitions = ctx.short ? 2 : 4;
  const n = ctx.short ? 600 : 8_000;
  const m = ctx.short ? 300 : 4_000;
  const k = ctx.short ? 0 : 2_000;
  const c = new Campaign({
    context: ctx,
    name: `recreated-${mode}`,
    partitions,
    replicas: 2,
    sessionTimeoutMs: 10_000,
    definition: { offsets: { commitAfter: mode } },
  });
  const ids = new TopicIds(c.kafka, silentLogger());
  const problems: string[] = [];
  const phases: Phase[] = [];
  const phaseLines: string[] = [];
  let check: FinalCheck | undefined;
  let counter = 0;
  const idNow = async (): Promise<string | undefined> =>
    (await ids.lookup([c.topic]).catch(() => new Map<string, string>())).get(c.topic);
  const topicId = async (): Promise<string> => {
    for (let attempt = 0; ; attempt++) {
      const id = (await ids.lookup([c.topic]).catch(() => new Map<string, string>())).get(c.topic);
      if (id) return id;
      if (attempt > 60) throw new Error(`the broker names no topic id for ${c.topic}`);
      await sleep(500);
    }
  };
  const expected = (): Incarnations => ({
    reader: 'the records the step produced to each incarnation, acknowledged by the broker',
    byTopicId: new Map(
      phases.map((ph) => {
        const parts = new Map<number, Set<number>>();
        for (const r of ph.records) {
          let set = parts.get(r.partition);
          if (!set) parts.set(r.partition, (set = new Set()));
          set.add(r.offset);
        }
        return [ph.topicId, parts] as const;
      }),
    ),
  });
  /** Replicas that ended without being asked: a crash loop would show here. */
  const exitedAlone = (): string[] =>
    c.slots.flatMap((s) =>
      s.runs.filter((r) => !r.alive && !stoppedByUs.has(r)).map((r) => `${s.label} pid ${r.pid}`),
    );
  const stoppedByUs = new Set<object>();
  const stopAll = async (): Promise<void> => {
    const alone = exitedAlone();
    if (alone.length > 0) problems.push(`exited before being stopped: ${alone.join(', ')}`);
    for (const s of c.slots) if (s.run.alive) stoppedByUs.add(s.run);
    for (const s of c.slots) for (const r of s.runs) stoppedByUs.add(r);
    await c.stopAll();
  };
  const settleTimeout = ctx.short ? 60_000 : 240_000;
  try {
    // Phase A: the first incarnation, published and stopped.
    await c.createTopic();
    const idA = await topicId();
    phases.push({ name: 'A', topicId: idA, records: await produce(c, partitions, n, () => counter++) });
    const startedA = Date.now();
    await c.startReplicas();
    const sA = await settle(c, settleTimeout, expected());
    const secondsA = (Date.now() - startedA) / 1000;
    if (sA.stalled) problems.push(`phase A: ${sA.stalled}`);
    await stopAll();
    phaseLines.push(
      `- Phase A: ${n} records on ${partitions} partitions (topic id \`${idA}\`), 2 replicas started, published them and committed the log end in ${secondsA.toFixed(1)} s, and stopped (SIGTERM)`,
    );
    c.log(`phase A: ${n} records published under ${idA}; replicas stopped`);

    // Phase B: deleted and created again while the group is stopped.
    const recreateB = await recreate(c, partitions, idA, idNow);
    const idB = await topicId();
    if (idB === idA) problems.push(`phase B: the recreated topic has the old id ${idA}`);
    phases.push({ name: 'B', topicId: idB, records: await produce(c, partitions, m, () => counter++) });
    const restartedAt = Date.now();
    const eventsFrom = new Map(c.slots.map((s) => [s.label, s.runs.length]));
    await c.restartStopped();
    const sB = await settle(c, settleTimeout, expected());
    if (sB.stalled) problems.push(`phase B: ${sB.stalled}`);
    const joinsB = joinsSince(c, eventsFrom);
    const wrongB = joinsB.filter((j) => claimedIds(j.e).some((id) => id !== idB));
    if (joinsB.length === 0) problems.push('phase B: no group join after the restart');
    if (wrongB.length > 0)
      problems.push(`phase B: ${wrongB.length} joins claimed another id than the new ${idB}`);
    phaseLines.push(
      `- Phase B: topic deleted and created again (${recreateB.toFixed(1)} s, new id \`${idB}\`), ${m} records produced at offsets ${offsetsLine(phases[1]!.records)} (all below the old log end: every one overlaps an old row's offset), both replicas restarted on their data dirs; quiescent ${((Date.now() - restartedAt) / 1000).toFixed(0)} s after; ${joinsB.length} joins, all claiming \`${idB}\`: ${wrongB.length === 0 ? 'yes' : 'NO'}; \`kafka.topic.recreated\` (a committed offset of the old id dropped) ${countSince(c, eventsFrom, 'kafka.topic.recreated')}`,
    );
    c.log(`phase B: ${m} records under ${idB}`);

    let idC: string | undefined;
    if (k > 0) {
      // Phase C: deleted and created again under consuming replicas, once both are in
      // one generation that assigns every partition (a late join of phase B is over).
      const stable = await untilOneGeneration(c, partitions, 60_000);
      if (!stable) problems.push('phase C: the replicas were not in one generation within 60 s');
      const marks = new Map(c.slots.map((s) => [s.label, s.run.events.length]));
      const recreateC = await recreate(c, partitions, phases[1]!.topicId, idNow);
      const recreatedAt = Date.now();
      idC = await topicId();
      if (idC === idB || idC === idA) problems.push(`phase C: the recreated topic has an old id ${idC}`);
      // At once, while the replicas may not have noticed yet: K/partitions per partition,
      // below the old fetch positions (M/partitions), so no record of the new incarnation
      // is fetched under the old claim (the window DESIGN.md names).
      phases.push({ name: 'C', topicId: idC, records: await produce(c, partitions, k, () => counter++) });
      const sC = await settle(c, settleTimeout, expected());
      if (sC.stalled) problems.push(`phase C: ${sC.stalled}`);
      const noticed: string[] = [];
      let noticing = 0;
      for (const s of c.slots) {
        const events = s.run.events.slice(marks.get(s.label) ?? 0);
        const at = events.findIndex(
          (e) => e.event === 'kafka.topic.recreated-while-consumed' && e.line.topicId === idC,
        );
        // A replica rejoins when it notices, or when another one's rejoin rebalances the
        // group first (its own watch, every 2 s, may not have asked yet): either way its
        // next claims are for the new id.
        const rejoin = events.find(
          (e) => e.event === 'kafka.join' && e.time >= recreatedAt && claimedIds(e).every((id) => id === idC),
        );
        if (!rejoin) problems.push(`phase C: ${s.label} did not rejoin with claims for ${idC}`);
        if (at >= 0) noticing += 1;
        noticed.push(
          `${s.label} ${at >= 0 ? `logged it ${((events[at]!.time - recreatedAt) / 1000).toFixed(1)} s after the recreation` : 'did not log it (rejoined in the rebalance the other one started)'}${rejoin ? `, claimed the new id ${((rejoin.time - recreatedAt) / 1000).toFixed(1)} s after the recreation` : ', NO rejoin'}`,
        );
      }
      if (noticing === 0) problems.push('phase C: no replica logged kafka.topic.recreated-while-consumed');
      const joinsC = c.slots.reduce(
        (sum, s) =>
          sum + s.run.events.slice(marks.get(s.label) ?? 0).filter((e) => e.event === 'kafka.join').length,
        0,
      );
      const lastJoins = c.slots
        .map((s) => [...s.run.events].reverse().find((e) => e.event === 'kafka.join'))
        .filter((e): e is ReplicaEvent => e !== undefined);
      const wrongC = lastJoins.filter((j) => claimedIds(j).some((id) => id !== idC));
      if (wrongC.length > 0)
        problems.push(`phase C: ${wrongC.length} replicas' last claims are not for ${idC}`);
      phaseLines.push(
        `- Phase C: topic deleted and created again while both replicas consumed (${recreateC.toFixed(1)} s, new id \`${idC}\`), ${k} records produced at once at offsets ${offsetsLine(phases[2]!.records)}; \`kafka.topic.recreated-while-consumed\` logged by ${noticing} of ${c.slots.length} replicas, each rejoined with claims for the new id: ${noticed.every((x) => x.includes('claimed the new id')) ? 'yes' : 'NO'}; ${joinsC} joins in the phase; ${noticed.join('; ')}, last claims all for \`${idC}\`: ${wrongC.length === 0 ? 'yes' : 'NO'}; consumer crash-restarts ${c.count('kafka.crash')}`,
      );
      c.log(`phase C: ${k} records under ${idC}`);
    }

    await stopAll();
    check = await finalCheck(c, undefined, { incarnations: expected() });
    problems.push(...check.problems);
    problems.push(...c.notes.filter((x) => x.includes('exited')));
    const passed = problems.length === 0;
    const total = phases.reduce((s, ph) => s + ph.records.length, 0);
    const summary =
      `commitAfter '${mode}': ${phases.map((ph) => `${ph.name} ${ph.records.length} records (id ${ph.topicId.slice(0, 8)}…)`).join(', ')} on ${partitions} partitions, ${k > 0 ? 'the topic deleted and recreated twice (once with the group stopped, once under consuming replicas)' : 'the topic deleted and recreated once with the group stopped'}; ` +
      `${check.rows} rows = ${total} expected, each incarnation exactly its records (pylance: ${check.independent?.rows ?? '?'} rows, ${check.independent?.missing ?? '?'} absent, ${check.independent?.unexpected ?? '?'} not expected, ${check.independent?.duplicates ?? '?'} duplicate 4-tuples); no replica exited by itself (${c.slots.reduce((s, sl) => s + sl.runs.length, 0)} processes, every exit code 0); committed = log end of the current incarnation; data dirs clean.` +
      (passed ? '' : ` FAILED: ${problems.join('; ')}`);
    return {
      mode,
      passed,
      summary,
      details: campaignDetails(c, check, [
        ...phaseLines,
        ...problems.filter((p) => !check!.problems.includes(p)).map((p) => `- **${p}**`),
      ]),
    };
  } catch (error) {
    problems.push(`step error: ${String(error)}`);
    return {
      mode,
      passed: false,
      summary: `commitAfter '${mode}': FAILED: ${problems.join('; ')}`,
      details: [...phaseLines, ...problems.map((p) => `- **${p}**`)],
    };
  } finally {
    await ids.close().catch(() => undefined);
    await c.close();
  }
}

/** Waits until every live replica's last join is of one generation that assigned every partition. */
async function untilOneGeneration(c: Campaign, partitions: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const last = c.slots.map((s) => [...s.run.events].reverse().find((e) => e.event === 'kafka.join'));
    const generations = new Set(last.map((e) => (e ? Number(e.line.generation) : -1)));
    const assigned = last.reduce(
      (n, e) => n + (Array.isArray(e?.line.assigned) ? e.line.assigned.length : 0),
      0,
    );
    if (generations.size === 1 && !generations.has(-1) && assigned === partitions) return true;
    if (Date.now() > deadline) return false;
    await sleep(250);
  }
}

/**
 * Deletes the campaign's topic and creates it again (same name and partitions); seconds
 * taken. A createTopics that fails (the deletion not finished, a timeout waiting for
 * leaders) may still have created the topic: it is done once the broker names another id
 * than the old one for it.
 */
async function recreate(
  c: Campaign,
  partitions: number,
  oldId: string,
  idOf: () => Promise<string | undefined>,
): Promise<number> {
  const started = Date.now();
  await c.admin.deleteTopics({ topics: [c.topic], timeout: 30_000 });
  for (let i = 0; (await c.admin.listTopics()).includes(c.topic); i++) {
    if (i > 150) throw new Error(`${c.topic} still listed 30 s after its deletion`);
    await sleep(200);
  }
  for (let i = 0; ; i++) {
    const created = await c.admin
      .createTopics({ topics: [{ topic: c.topic, numPartitions: partitions }], waitForLeaders: true })
      .catch(() => false);
    if (created) break;
    const id = await idOf().catch(() => undefined);
    if (id !== undefined && id !== oldId) break;
    if (i > 60) throw new Error(`${c.topic} could not be created again`);
    await sleep(500);
  }
  await createTopicReady(c.admin, c.topic, partitions);
  const ends = await c.admin.fetchTopicOffsets(c.topic);
  if (ends.length !== partitions)
    throw new Error(`${c.topic} came back with ${ends.length} partitions, not ${partitions}`);
  return (Date.now() - started) / 1000;
}

/** Round-robin over the partitions, PER_SEND records a send per partition, JSON only. */
async function produce(
  c: Campaign,
  partitions: number,
  count: number,
  next: () => number,
): Promise<LogRecord[]> {
  const producer = await connectedProducer(c);
  const send = producer.send.bind(producer);
  const out: LogRecord[] = [];
  try {
    const perPartition = Math.ceil(count / partitions);
    for (let sent = 0; sent < perPartition; sent += PER_SEND) {
      for (let p = 0; p < partitions; p++) {
        const messages = Array.from({ length: Math.min(PER_SEND, perPartition - sent) }, () => ({
          value: checksummedValue(c.random, next(), PAYLOAD_CHARS),
        }));
        out.push(...(await sendToPartition(send, c.topic, p, messages)));
      }
    }
  } finally {
    await producer.disconnect().catch(() => undefined);
  }
  return out;
}

function offsetsLine(records: readonly LogRecord[]): string {
  const by = new Map<number, number[]>();
  for (const r of records) by.set(r.partition, [...(by.get(r.partition) ?? []), r.offset]);
  return [...by]
    .sort((a, b) => a[0] - b[0])
    .map(([p, o]) => `p${p} ${Math.min(...o)}–${Math.max(...o)}`)
    .join(', ');
}

/** kafka.join events of the runs started at or after the given run index per slot. */
function joinsSince(c: Campaign, fromRun: ReadonlyMap<string, number>): { label: string; e: ReplicaEvent }[] {
  return c.slots.flatMap((s) =>
    s.runs
      .slice(fromRun.get(s.label) ?? 0)
      .flatMap((r) => r.events.filter((e) => e.event === 'kafka.join').map((e) => ({ label: s.label, e }))),
  );
}

function countSince(c: Campaign, fromRun: ReadonlyMap<string, number>, event: string): number {
  return c.slots.reduce(
    (n, s) =>
      n +
      s.runs
        .slice(fromRun.get(s.label) ?? 0)
        .reduce((m, r) => m + r.events.filter((e) => e.event === event).length, 0),
    0,
  );
}

function claimedIds(join: ReplicaEvent): string[] {
  const claimed = join.line.claimed;
  if (!Array.isArray(claimed)) return [];
  return claimed.map((x: unknown) =>
    typeof x === 'object' && x !== null && 'topicId' in x ? String(x.topicId) : '',
  );
}
