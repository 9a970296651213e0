import type { Producer, Transaction } from 'kafkajs';
import { Campaign, type KillRecord } from '../support/campaign';
import { finalCheck } from '../support/final-check';
import { settle } from '../support/settle';
import {
  connectedProducer,
  keysOf,
  metricValues,
  MiB,
  readableOf,
  readUntil,
  recordValue,
  rowNumbers,
  sendToPartition,
  type LogRecord,
} from '../support/gapped-topics';
import { campaignDetails } from '../support/report-lines';
import { sleep } from '../support/random';
import type { QualifyContext, QualifyStep, QualifyStepReport } from '../step';

const PAYLOAD_CHARS = 1_000;
const BAD_EVERY = 997;
/** Records per send inside a transaction (~0.5 MiB, well inside a request). */
const PER_SEND = 400;
/** kafka-lance's fetch size per partition (src/kafka/ingestion.ts maxBytesPerPartition). */
const FETCH_BYTES = 4 * MiB;

interface Txn {
  readonly outcome: 'commit' | 'abort';
  readonly records: LogRecord[];
  readonly ns: number[];
  /** Bytes of record values per partition. */
  readonly bytes: number[];
}

/**
 * A transactional producer (`transactionalId`, idempotent, one request in flight) writes
 * committed and aborted transactions over every partition while two replicas consume:
 * one aborted transaction larger than a fetch (4 MiB) on every partition, small aborted
 * ones between the committed ones, and last an aborted one on every partition, so that
 * each partition's log ends with an abort marker. Midway one replica is SIGKILLed (at three
 * moments in the full run) and restarted from its data dir. Checks: what a read_committed reader reads is exactly the
 * committed records; those offsets are rows or dead letters and no row is elsewhere (the
 * final check), no aborted record's `n` is in the table and every committed one is there
 * once; committed = log end (markers included) and every partition's
 * `kafka_lance_consumer_lag` is 0 on the replica that owns it.
 */
export const step: QualifyStep = {
  name: 'transactional',
  title: 'Transactional producer: aborted transactions and markers',
  async run(ctx: QualifyContext): Promise<QualifyStepReport> {
    const partitions = ctx.short ? 2 : 4;
    const rounds = ctx.short ? 8 : 24;
    const perCommit = ctx.short ? 240 : 800;
    const bigPerPartition = ctx.short ? 4_000 : 5_000;
    const c = new Campaign({ context: ctx, name: 'txn', partitions, replicas: 2, sessionTimeoutMs: 10_000 });
    const txns: Txn[] = [];
    try {
      await c.setUp();
      const producer = await connectedProducer(c, {
        transactionalId: `${c.topic}-producer`,
      });
      let n = 0;
      const run = async (outcome: 'commit' | 'abort', perPartition: number, chars = PAYLOAD_CHARS) => {
        txns.push(await transaction(producer, c, outcome, partitions, perPartition, () => n++, chars));
      };
      let big: Txn | undefined;
      const kills = ctx.short ? 1 : 3;
      const killRounds = new Set(
        Array.from({ length: kills }, (_, k) => Math.floor((rounds * (k + 1)) / (kills + 1))),
      );
      const rejoined: (number | undefined)[] = [];
      try {
        for (let round = 0; round < rounds; round++) {
          await run('commit', Math.ceil(perCommit / partitions));
          await run('abort', c.random.int(5, 30));
          if (round === 1) {
            await run('abort', bigPerPartition);
            big = txns[txns.length - 1]!;
            c.log(
              `aborted a transaction of ${big.records.length} records (${mibs(big.bytes)} MiB per partition)`,
            );
          }
          if (killRounds.has(round)) {
            const slot = c.random.pick(c.slots);
            const k = await c.kill(slot, `round ${round + 1} of ${rounds} (random moment)`);
            await sleep(c.random.int(300, 2_000));
            const restarted = c.restart(slot);
            void restarted.seen('kafka.join', 120_000).then((e) => {
              if (e) rejoined[k.n - 1] = c.at(e.time);
            });
          }
          await sleep(c.random.int(200, ctx.short ? 800 : 1_500));
        }
        // The last transaction of every partition is aborted: each log ends with an abort marker.
        await run('abort', c.random.int(5, 30));
      } finally {
        await producer.disconnect().catch(() => undefined);
      }
      const producedAt = Date.now();
      const committedRecords = txns.filter((t) => t.outcome === 'commit').flatMap((t) => t.records);
      const abortedNs = new Set(txns.filter((t) => t.outcome === 'abort').flatMap((t) => t.ns));
      const committedNs = txns.filter((t) => t.outcome === 'commit').flatMap((t) => t.ns);
      const badNs = new Set(committedNs.filter((x) => x % BAD_EVERY === BAD_EVERY - 1));
      c.log(
        `${txns.length} transactions: ${committedRecords.length} records committed, ${abortedNs.size} aborted; reading the topic`,
      );

      // What a read_committed reader reads: exactly the committed records.
      const read = await readUntil(ctx.brokers, c.topic, keysOf(committedRecords), 60_000, (l) => c.log(l));
      const readable = read.records;
      const readerDiff = {
        equal: read.extra === 0 && read.absent === 0,
        extra: read.extra,
        absent: read.absent,
      };
      const reference = readableOf('a read_committed kafkajs consumer, after the last transaction', readable);
      const settled = await settle(c, ctx.short ? 120_000 : 300_000, reference);
      const quiescentAfter = (Date.now() - producedAt) / 1000;

      // The owners' lag gauges (updated every second) reach 0 once commits pass the last marker.
      const lag = await ownersLag(c, partitions, 20_000);
      const exitedAlone = c.slots.filter((s) => !s.run.alive).map((s) => s.label);
      await c.stopAll();
      const check = await finalCheck(c, settled.stalled, { readable: reference });
      const rows = await rowNumbers(c);
      const abortedRows = [...rows.keys()].filter((x) => abortedNs.has(x)).length;
      const committedMissing = committedNs.filter((x) => !badNs.has(x) && !rows.has(x)).length;
      const committedTwice = [...rows.values()].filter((k) => k > 1).length;
      const ends = await c.admin.fetchTopicOffsets(c.topic);
      const markers =
        ends.reduce((s, e) => s + Number(e.high) - Number(e.low), 0) -
        committedRecords.length -
        abortedNs.size;

      const problems = [...check.problems];
      if (!readerDiff.equal)
        problems.push(
          `the reader read ${readerDiff.extra} records that are not committed ones and missed ${readerDiff.absent} committed ones`,
        );
      if (abortedRows > 0) problems.push(`${abortedRows} aborted records are rows`);
      if (committedMissing > 0) problems.push(`${committedMissing} committed records are not rows`);
      if (committedTwice > 0) problems.push(`${committedTwice} committed records are rows more than once`);
      if (lag.problems.length > 0) problems.push(...lag.problems);
      if (c.kills.length < kills) problems.push(`${c.kills.length} of ${kills} kills done`);
      if (!big || big.bytes.some((b) => b <= FETCH_BYTES))
        problems.push(
          `the large aborted transaction (${mibs(big?.bytes ?? [])} MiB) is not larger than a fetch`,
        );
      if (exitedAlone.length > 0) problems.push(`${exitedAlone.join(', ')} exited during the run`);
      const passed = problems.length === 0;
      const commits = txns.filter((t) => t.outcome === 'commit').length;
      const aborts = txns.length - commits;
      return {
        passed,
        summary:
          `${txns.length} transactions on ${partitions} partitions (${commits} committed: ${committedRecords.length} records; ${aborts} aborted: ${abortedNs.size} records, one of ${mibs(big?.bytes ?? [])} MiB per partition, larger than a ${FETCH_BYTES / MiB} MiB fetch; every log ends with an abort marker; ${markers} marker offsets) while 2 replicas consumed, ${killSummary(c.kills)}, each restarted from its data dir. ` +
          `The reader read exactly the ${readable.length} committed records. Quiescent ${quiescentAfter.toFixed(0)} s after the last transaction; ${check.rows} rows = ${readable.length} − ${check.deadLetters} dead letters; aborted records in the table: ${abortedRows}; committed missing: ${committedMissing}, more than once: ${committedTwice}` +
          ` (pylance: ${check.independent?.rows ?? '?'} rows, ${check.independent?.missing ?? '?'} absent, ${check.independent?.unexpected ?? '?'} unexpected, ${check.independent?.duplicates ?? '?'} duplicates); committed = log end; consumer lag ${lag.summary}. ` +
          (passed ? 'Passed.' : `FAILED: ${problems.join('; ')}`),
        details: campaignDetails(c, check, [
          `- Producer: kafkajs transactionalId, idempotent, maxInFlightRequests 1; ${rounds} rounds of one committed transaction (${perCommit} records over the partitions) and one small aborted one (5–30 per partition), the large aborted one (${bigPerPartition} records of ${PAYLOAD_CHARS} characters per partition) after round 2, a last aborted one; one committed record in ${BAD_EVERY} not JSON`,
          `- Kills: ${c.kills.map((k) => `${k.replica} (pid ${k.pid}) at ${k.at} s, during ${k.interrupted}; restarted${rejoined[k.n - 1] !== undefined ? `, in the group again at ${rejoined[k.n - 1]} s` : ''}`).join('; ') || 'none'}`,
          '',
          '| partition | log end | committed records | aborted records | marker offsets | committed offset |',
          '| --- | --- | --- | --- | --- | --- |',
          ...ends
            .sort((a, b) => a.partition - b.partition)
            .map((e) => {
              const mine = (t: Txn) => t.records.filter((r) => r.partition === e.partition).length;
              const com = txns.filter((t) => t.outcome === 'commit').reduce((s, t) => s + mine(t), 0);
              const ab = txns.filter((t) => t.outcome === 'abort').reduce((s, t) => s + mine(t), 0);
              return `| ${e.partition} | ${e.high} | ${com} | ${ab} | ${Number(e.high) - Number(e.low) - com - ab} | ${lag.committed.get(e.partition) ?? '?'} |`;
            }),
          '',
          `- Table by \`n\`: ${rows.size} distinct records; aborted ones present: ${abortedRows}; committed ones missing (not counting the ${badNs.size} not JSON): ${committedMissing}; present more than once: ${committedTwice}`,
          `- Consumer lag (kafka_lance_consumer_lag of the owning replica, after quiescence): ${lag.summary}`,
          `- Replicas: ${c.count('kafka.position.refetch')} \`kafka.position.refetch\`, ${c.count('kafka.join')} group joins`,
          ...problems.filter((p) => !check.problems.includes(p)).map((p) => `- **${p}**`),
        ]),
      };
    } finally {
      await c.close();
    }
  },
};

function killSummary(kills: readonly KillRecord[]): string {
  if (kills.length === 0) return 'no replica SIGKILLed';
  return `${kills.length} SIGKILL${kills.length > 1 ? 's' : ''} (${kills.map((k) => `${k.replica} at ${k.at} s during ${k.interrupted.split(' (')[0]}`).join(', ')})`;
}

/** Bytes per partition as "a / b" MiB. */
function mibs(bytes: readonly number[]): string {
  return bytes.map((b) => (b / MiB).toFixed(2)).join(' / ');
}

/** One transaction of `perPartition` records on every partition, committed or aborted. */
async function transaction(
  producer: Producer,
  c: Campaign,
  outcome: 'commit' | 'abort',
  partitions: number,
  perPartition: number,
  next: () => number,
  chars: number,
): Promise<Txn> {
  const txn: Transaction = await producer.transaction();
  const records: LogRecord[] = [];
  const ns: number[] = [];
  const bytes = Array.from({ length: partitions }, () => 0);
  try {
    for (let p = 0; p < partitions; p++) {
      for (let sent = 0; sent < perPartition; sent += PER_SEND) {
        const messages = Array.from({ length: Math.min(PER_SEND, perPartition - sent) }, () => {
          const id = next();
          ns.push(id);
          // Bad records only in committed transactions: they must end as dead letters.
          return {
            value: recordValue(
              c.random,
              id,
              chars,
              outcome === 'commit' ? BAD_EVERY : Number.MAX_SAFE_INTEGER,
            ),
          };
        });
        records.push(...(await sendToPartition(txn.send.bind(txn), c.topic, p, messages)));
        bytes[p]! += messages.reduce((sum, m) => sum + m.value.length, 0);
      }
    }
  } catch (error) {
    await txn.abort().catch(() => undefined);
    throw error;
  }
  if (outcome === 'commit') await txn.commit();
  else await txn.abort();
  return { outcome, records, ns, bytes };
}

/**
 * Polls the live replicas' metrics until every partition has an owner reporting lag 0
 * (or the time is up), and reads the group's committed offsets.
 */
async function ownersLag(
  c: Campaign,
  partitions: number,
  timeoutMs: number,
): Promise<{ summary: string; problems: string[]; committed: Map<number, number> }> {
  const deadline = Date.now() + timeoutMs;
  let seen = new Map<number, { replica: string; value: number }>();
  for (;;) {
    seen = new Map();
    for (const s of c.slots) {
      if (!s.run.alive) continue;
      const text = await c.metrics(s.run).catch(() => '');
      for (const m of metricValues(text, 'kafka_lance_consumer_lag'))
        if (m.labels.topic === c.topic)
          seen.set(Number(m.labels.partition), { replica: s.label, value: m.value });
    }
    const done = Array.from({ length: partitions }, (_, p) => seen.get(p)?.value === 0).every(Boolean);
    if (done || Date.now() > deadline) break;
    await sleep(1_000);
  }
  const [committed] = await c.admin.fetchOffsets({ groupId: c.groupId, topics: [c.topic] });
  const problems: string[] = [];
  for (let p = 0; p < partitions; p++) {
    const s = seen.get(p);
    if (!s) problems.push(`no live replica reports kafka_lance_consumer_lag for partition ${p}`);
    else if (s.value !== 0)
      problems.push(`kafka_lance_consumer_lag of partition ${p} is ${s.value} on ${s.replica}`);
  }
  return {
    summary: Array.from({ length: partitions }, (_, p) => {
      const s = seen.get(p);
      return s ? `p${p} ${s.value} (${s.replica})` : `p${p} not reported`;
    }).join(', '),
    problems,
    committed: new Map((committed?.partitions ?? []).map((p) => [p.partition, Number(p.offset)])),
  };
}
