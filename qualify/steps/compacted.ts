import { Campaign } from '../support/campaign';
import { finalCheck } from '../support/final-check';
import { settle } from '../support/settle';
import {
  connectedProducer,
  keysOf,
  MiB,
  readableOf,
  readUntil,
  recordValue,
  sendToPartition,
  type LogRecord,
} from '../support/gapped-topics';
import { campaignDetails } from '../support/report-lines';
import { sleep } from '../support/random';
import type { QualifyContext, QualifyStep, QualifyStepReport } from '../step';

/** Records per producer batch: the first UNIQUE keep keys of their own, the rest are hot keys. */
const BATCH = 200;
const UNIQUE = 170;
const PAYLOAD_CHARS = 1_000;
const HOT_PAYLOAD_CHARS = 100;
const BAD_EVERY = 997;
/**
 * The replicas' fetch size per partition: their `queue.maxBytes`, which sets it
 * (src/kafka/fetch-sizes.ts), below the default so that a partition takes several fetches.
 */
const FETCH_BYTES = 4 * MiB;

/**
 * A compacted topic (`cleanup.policy=compact`, segments rolled every 100 ms, the cleaner
 * allowed at once): per partition, producer batches of 200 records whose first 170 carry
 * keys of their own and ~1 KiB (they survive) and whose last 30 carry hot keys every later
 * batch writes again (the cleaner removes them), so every record batch but the last ends in
 * offsets that hold no record, and more than a fetch (4 MiB) survives per partition: a
 * fetch ends at such a tail. One record in 997 is not JSON (a dead letter). The step waits
 * until a read_committed kafkajs reader reads exactly the surviving records (the cleaner
 * has run), then two replicas consume the topic; the final check holds the reader's
 * offsets, not every offset of the log, to be rows or dead letters, and no row elsewhere.
 * The full run (4 partitions, ~18 MiB surviving each) also SIGKILLs one replica after the
 * first publications and restarts it from its data dir.
 */
export const step: QualifyStep = {
  name: 'compacted',
  title: 'Compacted topic: record batches whose tails the cleaner removed',
  async run(ctx: QualifyContext): Promise<QualifyStepReport> {
    const partitions = ctx.short ? 2 : 4;
    const batches = ctx.short ? 28 : 100;
    const c = new Campaign({
      context: ctx,
      name: 'compacted',
      partitions,
      replicas: 2,
      sessionTimeoutMs: 10_000,
      definition: { queue: { maxBytes: FETCH_BYTES } },
      topicConfig: {
        'cleanup.policy': 'compact',
        'segment.ms': '100',
        'min.cleanable.dirty.ratio': '0.01',
        'min.compaction.lag.ms': '0',
        'delete.retention.ms': '100',
      },
    });
    try {
      await c.createTopic();
      const produced = await produce(c, partitions, batches);
      const latest = new Map<string, LogRecord>();
      for (const r of produced.records) latest.set(`${r.partition}/${r.key}`, r);
      const survivors = [...latest.values()];
      const want = keysOf(survivors);
      const surviving = perPartition(partitions, survivors);
      c.log(
        `produced ${produced.records.length} records (${(produced.bytes / MiB).toFixed(1)} MiB) in ${produced.batches} batches; ${survivors.length} survive compaction (${surviving.map((s) => `p${s.partition} ${(s.bytes / MiB).toFixed(1)} MiB`).join(', ')}); waiting for the cleaner`,
      );

      // The cleaner has run when a plain reader reads exactly the survivors.
      const read = await readUntil(ctx.brokers, c.topic, want, ctx.short ? 150_000 : 300_000, (l) =>
        c.log(l),
      );
      if (read.extra > 0 || read.absent > 0)
        throw new Error(
          `the cleaner had not compacted ${c.topic} after ${read.passes} reads (${read.seconds.toFixed(0)} s): the reader read ${read.records.length} records (${read.extra} superseded still there, ${read.absent} survivors absent), ${survivors.length} expected`,
        );
      const readable = read.records;
      const passes = read.passes;
      const cleanerSeconds = read.seconds;
      const valueOf = new Map(survivors.map((r) => [`${r.partition}:${r.offset}`, r.value]));
      const changed = readable.filter((r) => valueOf.get(`${r.partition}:${r.offset}`) !== r.value).length;
      const ends = new Map(
        (await c.admin.fetchTopicOffsets(c.topic)).map((e) => [
          e.partition,
          { low: Number(e.low), high: Number(e.high) },
        ]),
      );
      c.log(
        `cleaner done after ${cleanerSeconds.toFixed(0)} s (${passes} reads): ${readable.length} records readable of ${[...ends.values()].reduce((n, e) => n + e.high - e.low, 0)} offsets; starting 2 replicas`,
      );

      const reference = readableOf('a read_committed kafkajs consumer, after the cleaner ran', readable);
      const replicasAt = Date.now();
      await c.startReplicas();
      if (!ctx.short) {
        // The full run kills one replica once it has published: its restart claims its
        // partitions again at a commit that follows a compacted tail.
        await Promise.race(c.slots.map((s) => s.run.next((e) => e.event === 'publication', 60_000)));
        await sleep(c.random.int(0, 2_000));
        const slot = c.random.pick(c.slots);
        await c.kill(slot, 'after its first publications (random moment)');
        await sleep(c.random.int(300, 2_000));
        c.restart(slot);
      }
      const settled = await settle(c, ctx.short ? 120_000 : 300_000, reference);
      const drained = (Date.now() - replicasAt) / 1000;
      const exitedAlone = c.slots.filter((s) => !s.run.alive).map((s) => s.label);
      await c.stopAll();
      const check = await finalCheck(c, settled.stalled, { readable: reference });
      const problems = [...check.problems];
      if (changed > 0)
        problems.push(`the reader read ${changed} records whose values differ from what was produced`);
      if (exitedAlone.length > 0) problems.push(`${exitedAlone.join(', ')} exited during the run`);
      const tails = produced.batches - partitions; // every batch but each partition's last ends in removed hot keys
      const refetches = c.count('kafka.position.refetch');
      const passed = problems.length === 0;
      const removed = produced.records.length - survivors.length;
      return {
        passed,
        summary:
          `${produced.records.length} keyed records (${(produced.bytes / MiB).toFixed(1)} MiB) on ${partitions} partitions of a compacted topic, in ${produced.batches} producer batches of ${BATCH} whose last ${BATCH - UNIQUE} records were superseded later; the cleaner removed ${removed} (reader: ${readable.length} readable after ${cleanerSeconds.toFixed(0)} s), leaving ${surviving.map((s) => `${(s.bytes / MiB).toFixed(1)} MiB`).join(' / ')} per partition (a fetch is ${FETCH_BYTES / MiB} MiB) and ${tails} record batches ending in emptied offsets. ` +
          `2 replicas${c.kills.length > 0 ? ` (${c.kills.map((k) => `${k.replica} SIGKILLed at ${k.at} s during ${k.interrupted.split(' (')[0]}, restarted`).join('; ')})` : ''}: quiescent ${drained.toFixed(0)} s after they started; ${check.rows} rows = ${readable.length} readable − ${check.deadLetters} dead letters, none at an offset the reader did not read` +
          ` (pylance: ${check.independent?.rows ?? '?'} rows, ${check.independent?.missing ?? '?'} absent, ${check.independent?.unexpected ?? '?'} unexpected, ${check.independent?.duplicates ?? '?'} duplicates); committed = log end; ${refetches} refetches. ` +
          (passed ? 'Passed.' : `FAILED: ${problems.join('; ')}`),
        details: campaignDetails(c, check, [
          `- Topic settings: cleanup.policy=compact, segment.ms=100, min.cleanable.dirty.ratio=0.01, min.compaction.lag.ms=0, delete.retention.ms=100 (broker log.cleaner.backoff.ms=1000)`,
          `- Production: ${produced.batches / partitions} batches per partition, one send each (one record batch): ${UNIQUE} records with keys of their own and ${PAYLOAD_CHARS}-character payloads, then ${BATCH - UNIQUE} records with hot keys (${HOT_PAYLOAD_CHARS} characters) that every later batch of the partition writes again; one record in ${BAD_EVERY} not JSON; then, after segment.ms, one record per partition that rolls the segment`,
          '',
          '| partition | offsets (log start–end) | records produced | surviving (readable) | surviving MiB | fetches of 4 MiB at least |',
          '| --- | --- | --- | --- | --- | --- |',
          ...surviving.map((s) => {
            const e = ends.get(s.partition)!;
            return `| ${s.partition} | ${e.low}–${e.high} | ${produced.records.filter((r) => r.partition === s.partition).length} | ${s.records} | ${(s.bytes / MiB).toFixed(2)} | ${Math.ceil(s.bytes / FETCH_BYTES)} |`;
          }),
          '',
          `- Cleaner: the reader read exactly the ${survivors.length} survivors after ${cleanerSeconds.toFixed(1)} s (${passes} reads); values read = values produced (${changed} differ)`,
          `- Replicas: ${refetches} \`kafka.position.refetch\` (a batch fetched from another position than the claim expects), ${c.count('kafka.join')} group joins`,
          ...problems.filter((p) => !check.problems.includes(p)).map((p) => `- **${p}**`),
        ]),
      };
    } finally {
      await c.close();
    }
  },
};

interface Produced {
  readonly records: LogRecord[];
  readonly batches: number;
  readonly bytes: number;
}

/**
 * Per partition, `batches` sends of BATCH records (unique keys first, hot keys last), then
 * one record per partition after segment.ms so that the last batches' segment is rolled
 * and cleanable.
 */
async function produce(c: Campaign, partitions: number, batches: number): Promise<Produced> {
  const producer = await connectedProducer(c);
  const send = producer.send.bind(producer);
  const records: LogRecord[] = [];
  let n = 0;
  let bytes = 0;
  let sent = 0;
  try {
    for (let b = 0; b < batches; b++) {
      for (let p = 0; p < partitions; p++) {
        const messages = Array.from({ length: BATCH }, (_, i) => {
          const id = n++;
          return i < UNIQUE
            ? { key: `own-${id}`, value: recordValue(c.random, id, PAYLOAD_CHARS, BAD_EVERY) }
            : {
                key: `hot-${i}`,
                value: recordValue(c.random, id, HOT_PAYLOAD_CHARS, Number.MAX_SAFE_INTEGER),
              };
        });
        records.push(...(await sendToPartition(send, c.topic, p, messages)));
        bytes += messages.reduce((s, m) => s + m.value.length, 0);
        sent += 1;
      }
    }
    await sleep(300);
    for (let p = 0; p < partitions; p++) {
      const id = n++;
      records.push(
        ...(await sendToPartition(send, c.topic, p, [
          { key: 'roll', value: recordValue(c.random, id, PAYLOAD_CHARS, Number.MAX_SAFE_INTEGER) },
        ])),
      );
    }
  } finally {
    await producer.disconnect().catch(() => undefined);
  }
  return { records, batches: sent, bytes };
}

function perPartition(
  partitions: number,
  survivors: readonly LogRecord[],
): { partition: number; records: number; bytes: number }[] {
  return Array.from({ length: partitions }, (_, partition) => {
    const mine = survivors.filter((r) => r.partition === partition);
    return { partition, records: mine.length, bytes: mine.reduce((s, r) => s + r.value.length, 0) };
  });
}
