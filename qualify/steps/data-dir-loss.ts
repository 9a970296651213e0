import * as lancedb from '@lancedb/lancedb';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { Kafka, Partitioners, logLevel, type Admin } from 'kafkajs';
import type { QualifyContext, QualifyStep, QualifyStepReport } from '../step';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { sleep, until } from '../../test/support/faults';
import { createTopicReady, PATIENT_PRODUCER_RETRY } from '../support/topics';

/**
 * The loss of one replica's whole data directory after a crash, in
 * both commit modes (`offsets.commitAfter`).
 *
 * Per mode, on a topic of its own (2 partitions) and a Lance table outside the data
 * directory (the table lives on shared storage; the data directory is the replica's
 * local disk):
 * 1. a replica publishes a first slice of records (short publication delay), stops;
 * 2. the same replica, restarted with a publication delay of 10 minutes, stages a
 *    second slice: with `staged` it commits it (durable in staging, not in Lance), with
 *    `published` it must not;
 * 3. it is SIGKILLed and its data directory deleted (rm -r);
 * 4. from what survives, the commits and the table, the step states what is lost:
 *    per partition, every offset below the committed offset that the table does not
 *    hold (count and ranges);
 * 5. a replica on a fresh data directory runs until the group is at the log end and
 *    the table stops changing; then the table is compared with everything produced.
 * Passes when: `staged` loses records (else the scenario missed its point) and the
 * missing ones are exactly the predicted ones; `published` predicts and loses nothing;
 * neither mode has a duplicate.
 */
export const step: QualifyStep = {
  name: 'data-dir-loss',
  title: "Loss of a replica's data directory after a crash (`offsets.commitAfter` staged and published)",
  async run(context: QualifyContext): Promise<QualifyStepReport> {
    const kafka = new Kafka({
      clientId: 'qualify-data-dir-loss',
      brokers: [...context.brokers],
      logLevel: logLevel.NOTHING,
    });
    const admin = kafka.admin();
    await admin.connect();
    try {
      const results: ModeResult[] = [];
      for (const mode of ['staged', 'published'] as const) {
        results.push(await runMode(context, kafka, admin, mode));
      }
      const passed = results.every((r) => r.problems.length === 0);
      const summary = results
        .map(
          (r) =>
            `\`${r.mode}\`: ${r.produced} records produced, ${r.predicted.total} predicted lost from the commits and the table after the loss, ${r.missing.total} missing at the end, ${r.duplicates} duplicated${r.problems.length > 0 ? ` — FAILED: ${r.problems.join('; ')}` : ''}.`,
        )
        .join(' ');
      const details: string[] = [];
      for (const r of results) {
        details.push(
          `### \`offsets.commitAfter: '${r.mode}'\``,
          '',
          `${r.firstSlice} records published in a first run, ${r.secondSlice} more staged by a run publishing after 10 minutes, SIGKILLed ${r.killedAfterSeconds.toFixed(1)} s after its start; data directory deleted; a replica on a fresh data directory ran to the log end (${r.recoverySeconds.toFixed(1)} s).`,
          '',
          '| partition | log end | committed at the loss | max offset in Lance at the loss | predicted lost (count: ranges) | missing at the end (count: ranges) |',
          '| --- | --- | --- | --- | --- | --- |',
          ...r.partitions.map(
            (p) =>
              `| ${p.partition} | ${p.logEnd} | ${p.committed} | ${p.maxPublished} | ${p.predicted.length}: ${ranges(p.predicted) || '-'} | ${p.missing.length}: ${ranges(p.missing) || '-'} |`,
          ),
          '',
          `Duplicated rows at the end: ${r.duplicates}. Verdict: ${r.problems.length === 0 ? 'passed' : `failed (${r.problems.join('; ')})`}.`,
          '',
        );
      }
      return { passed, summary, details };
    } finally {
      await admin.disconnect();
    }
  },
};

interface PartitionResult {
  readonly partition: number;
  readonly logEnd: number;
  readonly committed: number;
  readonly maxPublished: number;
  readonly predicted: number[];
  readonly missing: number[];
}

interface ModeResult {
  readonly mode: 'staged' | 'published';
  readonly produced: number;
  readonly firstSlice: number;
  readonly secondSlice: number;
  readonly killedAfterSeconds: number;
  readonly recoverySeconds: number;
  readonly partitions: PartitionResult[];
  readonly predicted: { total: number };
  readonly missing: { total: number };
  readonly duplicates: number;
  readonly problems: string[];
}

const PARTITIONS = 2;
const TABLE = 'events';
const SLOW_PUBLICATION_MS = 600_000;

async function runMode(
  context: QualifyContext,
  kafka: Kafka,
  admin: Admin,
  mode: 'staged' | 'published',
): Promise<ModeResult> {
  const slice = context.short ? 600 : 6_000;
  const name = `ddl-${mode}-${context.seed}-${Date.now().toString(36)}`;
  const topic = `qualify-${name}`;
  const groupId = `kafka-lance-${name}`;
  const dir = path.join(context.workDir, mode);
  const lanceUri = path.join(dir, 'lance');
  await fsp.mkdir(dir, { recursive: true });
  await createTopicReady(admin, topic, PARTITIONS);
  const definition = (publicationDelayMs: number) => ({
    name,
    topics: [topic],
    groupId,
    table: TABLE,
    brokers: [...context.brokers],
    schema: 'infer',
    offsets: { commitAfter: mode },
    lance: { uri: lanceUri },
    deadLetter: { file: path.join(dir, 'dead-letters.jsonl') },
    durabilityIntervalMs: 200,
    sessionTimeoutMs: 6_000,
    heartbeatIntervalMs: 1_000,
    staging: { maxPartAgeMs: 500 },
    materializer: { maxPublicationDelayMs: publicationDelayMs, pollMs: 200 },
  });
  const quick = path.join(dir, 'quick.json');
  const slow = path.join(dir, 'slow.json');
  await fsp.writeFile(quick, JSON.stringify(definition(200), null, 2));
  await fsp.writeFile(slow, JSON.stringify(definition(SLOW_PUBLICATION_MS), null, 2));
  const dataDir = path.join(dir, 'data-1');
  const log = (line: string) => context.log(`data-dir-loss [${mode}] ${line}`);

  // 1. A first slice, published and committed.
  await produce(kafka, topic, 0, slice);
  let replica = new ReplicaProcess(quick, dataDir, context.brokers);
  await untilAtLogEnd(admin, groupId, topic, 120_000);
  await untilTableRows(lanceUri, slice, 60_000);
  await stopReplica(replica);
  log(`first slice of ${slice} published and committed`);

  // 2. A second slice, staged by a replica that publishes only after 10 minutes.
  const startedAt = Date.now();
  replica = new ReplicaProcess(slow, dataDir, context.brokers);
  await replica.waitForEvent('kafka.join', 90_000);
  await produce(kafka, topic, slice, slice);
  if (mode === 'staged') {
    // Durable in staging and committed: what a lost data directory takes with it.
    await untilAtLogEnd(admin, groupId, topic, 120_000);
  } else {
    // Staged and sealed (parts older than their age limit, several durability ticks).
    await untilStaged(path.join(dataDir, 'staging', TABLE), 60_000);
    await sleep(2_000);
  }

  // 3. Crash, and the data directory is gone.
  await replica.kill();
  const killedAfterSeconds = (Date.now() - startedAt) / 1000;
  await fsp.rm(dataDir, { recursive: true, force: true });
  log(`replica SIGKILLed after ${killedAfterSeconds.toFixed(1)} s, data directory deleted`);

  // 4. What the surviving state says is lost: offsets below the commit that the table lacks.
  const ends = await logEnds(admin, topic);
  const committed = await committedOffsets(admin, groupId, topic);
  const atLoss = await tableOffsets(lanceUri);
  const predicted = new Map<number, number[]>();
  for (let p = 0; p < PARTITIONS; p++) {
    const have = new Set(atLoss.get(p) ?? []);
    const lost: number[] = [];
    for (let o = 0; o < Math.max(0, committed.get(p) ?? 0); o++) if (!have.has(o)) lost.push(o);
    predicted.set(p, lost);
  }

  // 5. A replica on a fresh data directory runs to the log end.
  const recoveryStarted = Date.now();
  replica = new ReplicaProcess(quick, path.join(dir, 'data-2'), context.brokers);
  const problems: string[] = [];
  try {
    await untilAtLogEnd(admin, groupId, topic, 120_000);
    await untilTableQuiet(lanceUri, 3_000, 60_000);
  } catch (error) {
    problems.push(error instanceof Error ? error.message : String(error));
  }
  const recoverySeconds = (Date.now() - recoveryStarted) / 1000;
  await stopReplica(replica);

  const atEnd = await tableOffsets(lanceUri);
  let duplicates = 0;
  const partitions: PartitionResult[] = [];
  for (let p = 0; p < PARTITIONS; p++) {
    const offsets = atEnd.get(p) ?? [];
    const counts = new Map<number, number>();
    for (const o of offsets) counts.set(o, (counts.get(o) ?? 0) + 1);
    for (const n of counts.values()) if (n > 1) duplicates += n - 1;
    const end = ends.get(p) ?? 0;
    const missing: number[] = [];
    for (let o = 0; o < end; o++) if (!counts.has(o)) missing.push(o);
    const before = atLoss.get(p) ?? [];
    partitions.push({
      partition: p,
      logEnd: end,
      committed: committed.get(p) ?? -1,
      maxPublished: before.length > 0 ? Math.max(...before) : -1,
      predicted: predicted.get(p) ?? [],
      missing,
    });
  }
  const predictedTotal = partitions.reduce((n, p) => n + p.predicted.length, 0);
  const missingTotal = partitions.reduce((n, p) => n + p.missing.length, 0);
  for (const p of partitions) {
    if (ranges(p.predicted) !== ranges(p.missing))
      problems.push(
        `p${p.partition}: predicted lost ${ranges(p.predicted) || 'none'}, missing ${ranges(p.missing) || 'none'}`,
      );
  }
  if (mode === 'staged' && predictedTotal === 0)
    problems.push('nothing was committed but unpublished at the crash: the scenario did not reach its point');
  if (mode === 'published' && missingTotal > 0) problems.push(`${missingTotal} records lost`);
  if (duplicates > 0) problems.push(`${duplicates} duplicated rows`);
  log(`predicted lost ${predictedTotal}, missing ${missingTotal}, duplicates ${duplicates}`);
  await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
  return {
    mode,
    produced: 2 * slice,
    firstSlice: slice,
    secondSlice: slice,
    killedAfterSeconds,
    recoverySeconds,
    partitions,
    predicted: { total: predictedTotal },
    missing: { total: missingTotal },
    duplicates,
    problems,
  };
}

/** SIGTERM (graceful: flush, commit, leave), SIGKILL after 60 s. */
async function stopReplica(replica: ReplicaProcess): Promise<void> {
  const timer = setTimeout(() => void replica.kill('SIGKILL'), 60_000);
  await replica.kill('SIGTERM');
  clearTimeout(timer);
}

async function produce(kafka: Kafka, topic: string, first: number, count: number): Promise<void> {
  const producer = kafka.producer({
    createPartitioner: Partitioners.DefaultPartitioner,
    retry: PATIENT_PRODUCER_RETRY,
  });
  await producer.connect();
  try {
    for (let i = 0; i < count; i += 500) {
      const n = Math.min(500, count - i);
      await producer.send({
        topic,
        messages: Array.from({ length: n }, (_, k) => {
          const id = first + i + k;
          return { partition: id % PARTITIONS, value: JSON.stringify({ id, text: `record ${id}` }) };
        }),
      });
    }
  } finally {
    await producer.disconnect();
  }
}

async function logEnds(admin: Admin, topic: string): Promise<Map<number, number>> {
  return new Map((await admin.fetchTopicOffsets(topic)).map((o) => [o.partition, Number(o.high)]));
}

async function committedOffsets(admin: Admin, groupId: string, topic: string): Promise<Map<number, number>> {
  const [c] = await admin.fetchOffsets({ groupId, topics: [topic] });
  return new Map((c?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
}

async function untilAtLogEnd(admin: Admin, groupId: string, topic: string, timeoutMs: number): Promise<void> {
  await until(
    'committed offsets at the log end',
    async () => {
      const ends = await logEnds(admin, topic);
      const committed = await committedOffsets(admin, groupId, topic);
      return [...ends].every(([p, end]) => committed.get(p) === end) ? true : undefined;
    },
    timeoutMs,
  );
}

/** Waits until the staging directory holds sealed parts and no open one. */
async function untilStaged(tableDir: string, timeoutMs: number): Promise<void> {
  await until(
    'sealed parts in staging',
    async () => {
      const names = await fsp.readdir(tableDir).catch(() => [] as string[]);
      const sealed = names.filter((n) => n.endsWith('.arrows')).length;
      const open = names.filter((n) => n.endsWith('.arrows.part')).length;
      return sealed > 0 && open === 0 ? true : undefined;
    },
    timeoutMs,
  );
}

/** (partition → every _offset row, duplicates included) of the table, read on a new connection. */
async function tableOffsets(uri: string): Promise<Map<number, number[]>> {
  const db = await lancedb.connect(uri);
  try {
    if (!(await db.tableNames()).includes(TABLE)) return new Map();
    const table = await db.openTable(TABLE);
    const rows = (await table.query().select(['_partition', '_offset']).toArray()) as {
      _partition: number;
      _offset: bigint | number;
    }[];
    const out = new Map<number, number[]>();
    for (const r of rows) {
      const list = out.get(r._partition) ?? [];
      list.push(Number(r._offset));
      out.set(r._partition, list);
    }
    table.close();
    return out;
  } finally {
    db.close();
  }
}

async function untilTableRows(uri: string, rows: number, timeoutMs: number): Promise<void> {
  await until(
    `${rows} rows in the table`,
    async () => {
      let n = 0;
      for (const list of (await tableOffsets(uri)).values()) n += list.length;
      return n >= rows ? true : undefined;
    },
    timeoutMs,
  );
}

/** Waits until the table's row count has not changed for `quietMs`. */
async function untilTableQuiet(uri: string, quietMs: number, timeoutMs: number): Promise<void> {
  let last = -1;
  let since = Date.now();
  await until(
    'the table to stop changing',
    async () => {
      let n = 0;
      for (const list of (await tableOffsets(uri)).values()) n += list.length;
      if (n !== last) {
        last = n;
        since = Date.now();
        return undefined;
      }
      return Date.now() - since >= quietMs ? true : undefined;
    },
    timeoutMs,
  );
}

/** Offsets (sorted or not) as "a-b,c" runs. */
function ranges(offsets: readonly number[]): string {
  const sorted = [...offsets].sort((a, b) => a - b);
  const out: string[] = [];
  for (let i = 0; i < sorted.length;) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    out.push(i === j ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return out.join(',');
}
