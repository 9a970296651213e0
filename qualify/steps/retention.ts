import { decodeChain } from '../../src/ownership/chain';
import { Campaign } from '../support/campaign';
import type { ReadableOffsets } from '../support/expected-offsets';
import { finalCheck } from '../support/final-check';
import { ranges } from '../support/log-offsets';
import { settle } from '../support/settle';
import {
  connectedProducer,
  keysOf,
  metricValues,
  MiB,
  readUntil,
  recordValue,
  sendToPartition,
  type LogRecord,
} from '../support/gapped-topics';
import type { ReplicaEvent } from '../support/replica';
import { campaignDetails } from '../support/report-lines';
import { sleep } from '../support/random';
import type { QualifyContext, QualifyStep, QualifyStepReport } from '../step';

const PAYLOAD_CHARS = 1_000;
const BAD_EVERY = 997;
const PER_SEND = 250;

interface PartitionPlan {
  readonly partition: number;
  /** Committed offset (= log end) when both replicas had stopped. */
  readonly committedAtStop: number;
  /** The log start deleteTopicRecords moved to. */
  readonly newLogStart: number;
  readonly logEnd: number;
}

interface LostReport {
  readonly replica: string;
  readonly partition: number;
  readonly from: number;
  readonly to: number;
  readonly count: number;
}

/**
 * Retention passing the group's position: two replicas publish a first slice and stop;
 * a second slice is produced; `deleteTopicRecords` moves every partition's log start past
 * the group's committed offset (into the second slice); the replicas restart. The broker
 * answers their first fetch OFFSET_OUT_OF_RANGE, and kafka-lance must resume at the log
 * start, name and count the range nobody read, keep the ownership chain in the commit
 * metadata and commit to the log end. Checks: every record of the first slice and every
 * record still in the log is a row or a dead letter, exactly once, and no row is at a
 * deleted offset (the final check, with those offsets as its reference); per partition the
 * replicas' `kafka.offsets.lost` events name exactly the deleted-before-read range and
 * `kafka_lance_offsets_lost_total` counts it; committed = log end; every partition's
 * commit metadata decodes to a non-empty chain.
 */
export const step: QualifyStep = {
  name: 'retention',
  title: "Retention (deleteRecords) passing the group's committed position",
  async run(ctx: QualifyContext): Promise<QualifyStepReport> {
    const partitions = ctx.short ? 2 : 4;
    const firstSlice = ctx.short ? 1_000 : 8_000;
    const secondSlice = ctx.short ? 2_000 : 16_000;
    const c = new Campaign({
      context: ctx,
      name: 'retention',
      partitions,
      replicas: 2,
      sessionTimeoutMs: 10_000,
    });
    try {
      await c.setUp();
      let n = 0;
      const first = await produce(c, partitions, firstSlice, () => n++);
      const s1 = await settle(c, ctx.short ? 90_000 : 180_000);
      if (s1.stalled) throw new Error(`the first slice did not settle: ${s1.stalled}`);
      await c.stopAll();
      const [atStop] = await c.admin.fetchOffsets({ groupId: c.groupId, topics: [c.topic] });
      const committedAtStop = new Map((atStop?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
      c.log(
        `first slice of ${first.length} records published; both replicas stopped; committed ${[...committedAtStop].map(([p, o]) => `p${p} ${o}`).join(', ')}`,
      );

      const second = await produce(c, partitions, secondSlice, () => n++);
      const ends = new Map(
        (await c.admin.fetchTopicOffsets(c.topic)).map((e) => [e.partition, Number(e.high)]),
      );
      const plan: PartitionPlan[] = Array.from({ length: partitions }, (_, partition) => {
        const committed = committedAtStop.get(partition) ?? 0;
        const logEnd = ends.get(partition)!;
        // Past the committed offset, into the second slice: between a quarter and three quarters of it.
        const span = logEnd - committed;
        const newLogStart = committed + c.random.int(Math.floor(span / 4), Math.floor((3 * span) / 4));
        return { partition, committedAtStop: committed, newLogStart, logEnd };
      });
      await c.admin.deleteTopicRecords({
        topic: c.topic,
        partitions: plan.map((p) => ({ partition: p.partition, offset: String(p.newLogStart) })),
      });
      const bounds = new Map(
        (await c.admin.fetchTopicOffsets(c.topic)).map((e) => [
          e.partition,
          { low: Number(e.low), high: Number(e.high) },
        ]),
      );
      const problems: string[] = [];
      for (const p of plan) {
        const b = bounds.get(p.partition)!;
        if (b.low !== p.newLogStart || !(b.low > p.committedAtStop))
          problems.push(
            `p${p.partition}: log start ${b.low} after deleteRecords, wanted ${p.newLogStart} (> committed ${p.committedAtStop})`,
          );
      }
      c.log(
        `${second.length} more records; deleteRecords moved the log start to ${plan.map((p) => `p${p.partition} ${p.newLogStart}`).join(', ')}; restarting the replicas`,
      );

      // The reference: the first slice (rows already) and what the log still holds.
      const kept = [...first, ...second.filter((r) => r.offset >= plan[r.partition]!.newLogStart)];
      const deleted = second.filter((r) => r.offset < plan[r.partition]!.newLogStart);
      const read = await readUntil(
        ctx.brokers,
        c.topic,
        keysOf(second.filter((r) => r.offset >= plan[r.partition]!.newLogStart)),
        60_000,
        (l) => c.log(l),
      );
      const stillInLog = read.records;
      const readerDiff = {
        equal: read.extra === 0 && read.absent === 0,
        extra: read.extra,
        absent: read.absent,
      };
      if (!readerDiff.equal)
        problems.push(
          `a reader read ${readerDiff.extra} records outside [log start, log end) and missed ${readerDiff.absent} in it`,
        );
      const reference: ReadableOffsets = {
        reader:
          'the first slice (published before the deletion) and a read_committed kafkajs consumer after it',
        offsets: new Map(
          Array.from({ length: partitions }, (_, p) => [
            p,
            new Set([...first, ...stillInLog].filter((r) => r.partition === p).map((r) => r.offset)),
          ]),
        ),
      };

      const restartedAt = Date.now();
      await c.restartStopped();
      const settled = await settle(c, ctx.short ? 120_000 : 300_000, reference);
      const quiescentAfter = (Date.now() - restartedAt) / 1000;
      const secondRuns = c.slots.map((s) => s.run);
      // Every partition named once by the replica that met the deletion.
      const lostEvents = await until(() => {
        const events = lostOf(secondRuns.flatMap((r) => r.events.map((e) => ({ replica: r.label, e }))));
        return new Set(events.map((e) => e.partition)).size >= partitions ? events : undefined;
      }, 15_000);
      const lost =
        lostEvents ?? lostOf(secondRuns.flatMap((r) => r.events.map((e) => ({ replica: r.label, e }))));
      const metricByPartition = new Map<number, number>();
      for (const run of secondRuns) {
        if (!run.alive) continue;
        const text = await c.metrics(run).catch(() => '');
        for (const m of metricValues(text, 'kafka_lance_offsets_lost_total'))
          if (m.labels.topic === c.topic) {
            const p = Number(m.labels.partition);
            metricByPartition.set(p, (metricByPartition.get(p) ?? 0) + m.value);
          }
      }
      const exitedAlone = c.slots.filter((s) => !s.run.alive).map((s) => s.label);
      await c.stopAll();
      const check = await finalCheck(c, settled.stalled, { readable: reference });
      problems.push(...check.problems);

      // The lost ranges: exactly [committed at stop, new log start - 1] per partition.
      const lostLines: string[] = [];
      for (const p of plan) {
        const mine = lost.filter((l) => l.partition === p.partition);
        const want = { from: p.committedAtStop, to: p.newLogStart - 1 };
        const wrong = mine.filter(
          (l) => l.from !== want.from || l.to !== want.to || l.count !== want.to - want.from + 1,
        );
        const metric = metricByPartition.get(p.partition) ?? 0;
        const reported = mine.reduce((s, l) => s + l.count, 0);
        if (mine.length === 0)
          problems.push(`p${p.partition}: no kafka.offsets.lost event (expected ${want.from}–${want.to})`);
        if (wrong.length > 0)
          problems.push(
            `p${p.partition}: kafka.offsets.lost named ${wrong.map((l) => `${l.from}–${l.to} (${l.count})`).join(', ')}, expected ${want.from}–${want.to}`,
          );
        if (metric !== reported || metric === 0)
          problems.push(
            `p${p.partition}: kafka_lance_offsets_lost_total ${metric}, the events named ${reported}`,
          );
        const deletedHere = deleted.filter((r) => r.partition === p.partition).map((r) => r.offset);
        lostLines.push(
          `| ${p.partition} | ${p.committedAtStop} | ${p.newLogStart} | ${p.logEnd} | ${deletedHere.length}: ${ranges(deletedHere)} | ${mine.map((l) => `${l.replica}: ${l.from}–${l.to} (${l.count})`).join('; ') || 'none'} | ${metric} |`,
        );
      }

      // The chain survived: every partition's commit still carries its claims.
      const [final] = await c.admin.fetchOffsets({ groupId: c.groupId, topics: [c.topic] });
      const chains = (final?.partitions ?? [])
        .sort((a, b) => a.partition - b.partition)
        .map((p) => ({ partition: p.partition, offset: Number(p.offset), chain: decodeChain(p.metadata) }));
      for (let p = 0; p < partitions; p++) {
        const ch = chains.find((x) => x.partition === p);
        if (!ch || ch.chain.length === 0)
          problems.push(`p${p}: the commit metadata holds no ownership chain`);
      }
      if (exitedAlone.length > 0) problems.push(`${exitedAlone.join(', ')} exited during the run`);
      const passed = problems.length === 0;
      const deletedCount = deleted.length;
      return {
        passed,
        summary:
          `2 replicas published a first slice of ${first.length} records on ${partitions} partitions and stopped; ${second.length} more were produced and deleteRecords moved every log start past the group's committed offset, removing ${deletedCount} records nobody had read; the replicas restarted. ` +
          `Lost ranges named by \`kafka.offsets.lost\`: ${lost.map((l) => `p${l.partition} ${l.from}–${l.to}`).join(', ') || 'none'} (deleted: ${plan.map((p) => `p${p.partition} ${p.committedAtStop}–${p.newLogStart - 1}`).join(', ')}); kafka_lance_offsets_lost_total ${
            [...metricByPartition]
              .sort((a, b) => a[0] - b[0])
              .map(([p, v]) => `p${p} ${v}`)
              .join(', ') || 'none'
          }. ` +
          `Quiescent ${quiescentAfter.toFixed(0)} s after the restart; ${check.rows} rows = ${first.length + second.length - deletedCount} kept − ${check.deadLetters} dead letters, none at a deleted offset (pylance: ${check.independent?.rows ?? '?'} rows, ${check.independent?.missing ?? '?'} absent, ${check.independent?.unexpected ?? '?'} unexpected, ${check.independent?.duplicates ?? '?'} duplicates); committed = log end; chains ${chains.map((x) => `p${x.partition} ${x.chain.length} entries`).join(', ')}. ` +
          (passed ? 'Passed.' : `FAILED: ${problems.join('; ')}`),
        details: campaignDetails(c, check, [
          `- First slice: ${first.length} records (${((first.length * PAYLOAD_CHARS) / MiB).toFixed(1)} MiB), published and committed by 2 replicas, which then stopped (SIGTERM); second slice: ${second.length} records; deleteRecords; the replicas restarted ${((restartedAt - c.started) / 1000).toFixed(1)} s into the step`,
          '',
          '| partition | committed at stop | log start after deleteRecords | log end | deleted before read (count: offsets) | `kafka.offsets.lost` (replica: from–to (count)) | kafka_lance_offsets_lost_total |',
          '| --- | --- | --- | --- | --- | --- | --- |',
          ...lostLines,
          '',
          `- Kept: ${kept.length} records (${first.length} of the first slice, ${stillInLog.length} still in the log, read by a read_committed reader: ${readerDiff.equal ? 'exactly the offsets from the log start to the log end' : `${readerDiff.extra} extra, ${readerDiff.absent} absent`})`,
          `- Commit metadata after the run: ${chains.map((x) => `p${x.partition} at ${x.offset}, chain ${x.chain.map((e) => `${e.owner.slice(0, 12)}#${e.epoch}@${e.start}`).join(' → ')}`).join('; ')}`,
          ...problems.filter((p) => !check.problems.includes(p)).map((p) => `- **${p}**`),
        ]),
      };
    } finally {
      await c.close();
    }
  },
};

/** Round-robin over the partitions, PER_SEND records a send per partition. */
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
          value: recordValue(c.random, next(), PAYLOAD_CHARS, BAD_EVERY),
        }));
        out.push(...(await sendToPartition(send, c.topic, p, messages)));
      }
    }
  } finally {
    await producer.disconnect().catch(() => undefined);
  }
  return out;
}

function lostOf(events: readonly { replica: string; e: ReplicaEvent }[]): LostReport[] {
  return events
    .filter(({ e }) => e.event === 'kafka.offsets.lost')
    .map(({ replica, e }) => ({
      replica,
      partition: Number(e.line.partition),
      from: Number(e.line.from),
      to: Number(e.line.to),
      count: Number(e.line.count),
    }))
    .sort((a, b) => a.partition - b.partition);
}

async function until<T>(check: () => T | undefined, timeoutMs: number): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = check();
    if (v !== undefined || Date.now() > deadline) return v;
    await sleep(250);
  }
}
