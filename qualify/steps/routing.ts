import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { Partitioners, type Producer } from 'kafkajs';
import { Campaign, type Slot } from '../support/campaign';
import { readTablesIndependently, type TableReading } from '../support/independent-reader';
import { leftOver } from '../support/ledger-state';
import { sha256 } from '../support/producer';
import { sleep } from '../support/random';
import { createTopicReady, PATIENT_PRODUCER_RETRY } from '../support/topics';
import type { QualifyContext, QualifyStep, QualifyStepReport } from '../step';

const SESSION_TIMEOUT_MS = 8_000;
/** One record in this many is not JSON: a dead letter of its own topic, never a row. */
const BAD_EVERY = 29;

/**
 * Many topics into many tables: one consumer definition subscribes to a pattern and writes
 * each topic into a table named after it (`table: '{topic}'`). Three replicas consume 50
 * topics (20 in the short variant) while random replicas are SIGKILLed and restarted from
 * their data dirs; halfway, one more matching topic is created, which the running replicas
 * must pick up by themselves (`topicRefreshMs`). The verdict, read by pylance per table:
 * every table holds exactly its own topic's records (none of another topic), each once,
 * payloads intact; rows + dead letters = the records of the topic's log; every partition's
 * committed offset at its log end; no staged part or open publication left.
 */
export const step: QualifyStep = {
  name: 'routing',
  title: 'Many topics into many tables: a pattern subscription, a table per topic, three replicas with kills',
  async run(ctx: QualifyContext): Promise<QualifyStepReport> {
    const topicCount = ctx.short ? 20 : 50;
    const partitions = ctx.short ? 2 : 3;
    const perTopic = ctx.short ? 60 : 400;
    const kills = ctx.short ? 2 : 6;
    const c = new Campaign({
      context: ctx,
      name: 'routing',
      partitions,
      replicas: 3,
      sessionTimeoutMs: SESSION_TIMEOUT_MS,
      definition: { table: '{topic}', errors: { tolerance: 'all' } },
    });
    const prefix = `${c.topic}-t`;
    // The pattern needs the campaign's unique topic prefix, known once it is built.
    const definition = JSON.parse(readFileSync(c.definitionFile, 'utf8')) as Record<string, unknown>;
    definition.topics = [{ pattern: `^${prefix.replace(/[.-]/g, '\\$&')}\\d+$` }];
    definition.topicRefreshMs = 2_000;
    writeFileSync(c.definitionFile, JSON.stringify(definition, null, 2));
    const topics = Array.from({ length: topicCount }, (_, i) => `${prefix}${String(i).padStart(2, '0')}`);
    const late = `${prefix}${topicCount}`;
    let producer: Producer | undefined;
    try {
      await c.createTopic(); // the campaign's own topic: the pattern does not match it
      for (const t of topics) await createTopicReady(c.admin, t, partitions);
      c.log(`${topics.length} topics of ${partitions} partitions created`);
      await c.startReplicas();
      producer = c.kafka.producer({
        allowAutoTopicCreation: false,
        retry: PATIENT_PRODUCER_RETRY,
        createPartitioner: Partitioners.DefaultPartitioner,
      });
      await producer.connect();
      const produced = new Map<string, number>();
      const produce = async (topic: string, count: number) => {
        const start = produced.get(topic) ?? 0;
        const messages = Array.from({ length: count }, (_, i) => {
          const n = start + i;
          if (n % BAD_EVERY === BAD_EVERY - 1) return { partition: n % partitions, value: `not json {${n}` };
          const payload = `${topic}:${n}:${'x'.repeat(c.random.int(50, 400))}`;
          return { partition: n % partitions, value: JSON.stringify({ n, payload, sha: sha256(payload) }) };
        });
        await producer!.send({ topic, acks: -1, messages });
        produced.set(topic, start + count);
      };
      const rounds = kills + 2;
      const perRound = Math.ceil(perTopic / rounds);
      for (let round = 0; round < rounds; round++) {
        for (const t of topics) await produce(t, perRound);
        if (round === Math.floor(rounds / 2)) {
          // A topic created while the replicas run: picked up by the pattern's refresh.
          await createTopicReady(c.admin, late, partitions);
          topics.push(late);
          c.log(`created ${late} while the replicas run`);
          await produce(late, perRound * (rounds - round));
        }
        if (round < kills) {
          const slot = c.random.pick(c.slots);
          await sleep(c.random.int(500, ctx.short ? 2_000 : 4_000));
          await killAndRestart(c, slot);
        }
      }
      c.log(
        `production done: ${[...produced.values()].reduce((a, b) => a + b, 0)} records on ${topics.length} topics; settling`,
      );
      await c.restartStopped();
      const settled = await settleTables(c, topics, ctx.short ? 240_000 : 420_000);
      await c.stopAll();
      const check = await checkTables(c, topics);
      const problems = [...(settled.stalled ? [settled.stalled] : []), ...check.problems];
      const passed = problems.length === 0 && c.kills.length >= kills;
      return {
        passed,
        summary:
          `${check.records} records on ${topics.length} topics of ${partitions} partitions (one created while the replicas ran), ` +
          `one pattern subscription, \`table: '{topic}'\`, 3 replicas, ${c.kills.length} SIGKILLs each followed by a restart from the replica's data dir. ` +
          `Quiescent ${settled.seconds.toFixed(0)} s after production ended. ${check.tables} tables read by ${check.reader}: ` +
          `${check.rows} rows + ${check.deadLetters} dead letters = ${check.records} records; no row in a table of another topic, none twice. ` +
          (passed ? 'Passed.' : `FAILED: ${problems.slice(0, 10).join('; ')}`) +
          ` ${c.at().toFixed(0)} s.`,
        details: [
          `- topics: \`${prefix}00\` … \`${late}\` (pattern \`^${prefix}\\d+$\`), tables named after them in ${c.lanceUri}`,
          ...c.kills.map(
            (k) =>
              `- kill #${k.n} at ${k.at} s: ${k.replica} (pid ${k.pid}), up ${k.uptime} s, during ${k.interrupted}`,
          ),
          ...problems.map((p) => `- problem: ${p}`),
          ...c
            .errorEvents()
            .slice(0, 20)
            .map((e) => `- error logged: ${e}`),
        ],
      };
    } finally {
      await producer?.disconnect().catch(() => undefined);
      await c.close();
    }
  },
};

async function killAndRestart(c: Campaign, slot: Slot): Promise<void> {
  if (!slot.run.alive) return;
  await c.kill(slot, 'random moment');
  await sleep(c.random.int(200, 1_500));
  c.restart(slot);
}

/** Records in each topic's log (high − low watermark, summed over its partitions). */
async function logRecords(c: Campaign, topic: string): Promise<number> {
  const ends = await c.admin.fetchTopicOffsets(topic);
  return ends.reduce((n, e) => n + Number(e.high) - Number(e.low), 0);
}

/** Distinct dead-lettered records per topic, over every replica's dead-letter file. */
function deadLettersByTopic(c: Campaign): Map<string, number> {
  const seen = new Map<string, Set<string>>();
  const name = path.basename(c.definitionFile, '.json');
  for (const s of c.slots) {
    const file = path.join(s.dataDir, 'dead-letter', `${name}.jsonl`);
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        const l = JSON.parse(line) as { topic?: string; partition?: number; offset?: string | number };
        if (typeof l.topic !== 'string') continue;
        let set = seen.get(l.topic);
        if (!set) seen.set(l.topic, (set = new Set()));
        set.add(`${l.partition}:${l.offset}`);
      } catch {
        // a torn last line of a killed writer
      }
    }
  }
  return new Map([...seen].map(([t, s]) => [t, s.size]));
}

async function tableRows(db: lancedb.Connection, names: ReadonlySet<string>, table: string): Promise<number> {
  if (!names.has(table)) return 0;
  const t = await db.openTable(table);
  try {
    return await t.countRows();
  } finally {
    t.close();
  }
}

/**
 * Waits until every topic is done: its partitions committed at the log end, its table's
 * rows + its dead letters = its log's records, and nothing of its table left in a data dir.
 */
async function settleTables(
  c: Campaign,
  topics: readonly string[],
  timeoutMs: number,
): Promise<{ seconds: number; stalled?: string }> {
  const started = Date.now();
  let lastLine = 0;
  for (;;) {
    const behind: string[] = [];
    try {
      const committed = await c.admin.fetchOffsets({ groupId: c.groupId, topics: [...topics] });
      const at = new Map(
        committed.flatMap((t) => t.partitions.map((p) => [`${t.topic}/${p.partition}`, Number(p.offset)])),
      );
      const dead = deadLettersByTopic(c);
      const db = await lancedb.connect(c.lanceUri, { readConsistencyInterval: 0 });
      try {
        const names = new Set(await db.tableNames());
        for (const topic of topics) {
          const ends = await c.admin.fetchTopicOffsets(topic);
          const lag = ends.filter((e) => at.get(`${topic}/${e.partition}`) !== Number(e.high));
          const log = ends.reduce((n, e) => n + Number(e.high) - Number(e.low), 0);
          const rows = await tableRows(db, names, topic);
          const left = c.slots.flatMap((s) => leftOver(s.dataDir, topic));
          if (lag.length > 0 || rows + (dead.get(topic) ?? 0) !== log || left.length > 0)
            behind.push(
              `${topic.slice(-3)}: rows ${rows} + dead ${dead.get(topic) ?? 0} / log ${log}` +
                `${lag.length > 0 ? `, ${lag.length} partitions not committed` : ''}${left.length > 0 ? `, ${left.join(', ')}` : ''}`,
            );
        }
      } finally {
        db.close();
      }
    } catch (error) {
      behind.push(`unreadable: ${String(error)}`);
    }
    if (behind.length === 0) return { seconds: (Date.now() - started) / 1000 };
    if (Date.now() - lastLine > 5_000) {
      c.log(`settling: ${behind.length} topics behind (${behind.slice(0, 3).join('; ')})`);
      lastLine = Date.now();
    }
    if (Date.now() - started > timeoutMs)
      return {
        seconds: (Date.now() - started) / 1000,
        stalled: `not quiescent after ${timeoutMs / 1000} s: ${behind.length} topics behind (${behind.slice(0, 5).join('; ')})`,
      };
    await sleep(2_000);
  }
}

/** pylance's reading of every table against its topic's log and dead letters. */
async function checkTables(
  c: Campaign,
  topics: readonly string[],
): Promise<{
  problems: string[];
  records: number;
  rows: number;
  deadLetters: number;
  tables: number;
  reader: string;
}> {
  const reading = await readTablesIndependently(topics.map((t) => path.join(c.lanceUri, `${t}.lance`)));
  const dead = deadLettersByTopic(c);
  const problems: string[] = [];
  let records = 0;
  let rows = 0;
  let deadLetters = 0;
  for (const [i, topic] of topics.entries()) {
    const table: TableReading = reading.tables[i]!;
    const log = await logRecords(c, topic);
    const d = dead.get(topic) ?? 0;
    records += log;
    rows += table.rows;
    deadLetters += d;
    if (!table.exists) problems.push(`${topic}: no table`);
    const foreign = Object.entries(table.byTopic).filter(([t]) => t !== topic);
    if (foreign.length > 0) problems.push(`${topic}: rows of other topics ${JSON.stringify(foreign)}`);
    if (table.rows + d !== log) problems.push(`${topic}: ${table.rows} rows + ${d} dead letters, log ${log}`);
    if (table.duplicates > 0)
      problems.push(`${topic}: ${table.duplicates} duplicates ${JSON.stringify(table.duplicateExamples)}`);
    if (table.checksumMismatches > 0)
      problems.push(`${topic}: ${table.checksumMismatches} checksum mismatches`);
  }
  return { problems, records, rows, deadLetters, tables: reading.tables.length, reader: reading.reader };
}
