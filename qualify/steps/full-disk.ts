/**
 * Qualification step: full disks. For each of the two file systems a
 * replica writes to (the staging data directory, the Lance table directory) a real
 * replica (`bin/kafka-lance run`, real broker) runs with that directory on a small
 * file system of the step's own: a tmpfs where this process may mount one, otherwise
 * the ENOSPC fault injection at the file-system layer (src/common/disk-space.ts). The
 * step fills it while records flow, checks that the replica pauses (one `disk.full`
 * event, `kafka_lance_disk_full{stage}` = 1, no commit past what is durable, rows do not
 * grow, the process stays up), frees it, and checks that the replica resumes by itself
 * and every produced record is in the table exactly once.
 */
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { Kafka, Partitioners, logLevel, type Admin } from 'kafkajs';
import type { QualifyContext, QualifyStep, QualifyStepReport } from '../step';
import type { DiskStage } from '../../src/common/errors';
import { logValue, writeConsumer, type Produced } from '../../test/support/ingestion-fixture';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { readKeys } from '../../test/support/faults';
import { smallFs, type SmallFs } from '../../test/support/small-fs';
import { createTopicReady, PATIENT_PRODUCER_RETRY } from '../support/topics';

const PARTITIONS = 2;
const TABLE = 'logs';

interface StageOutcome {
  readonly stage: DiskStage;
  readonly method: SmallFs['method'];
  readonly checks: readonly { readonly check: string; readonly ok: boolean; readonly detail: string }[];
  readonly produced: number;
  readonly rows: number;
  readonly pausedMs: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(250);
  }
}

async function produce(kafka: Kafka, topic: string, from: number, count: number): Promise<Produced[]> {
  const producer = kafka.producer({
    createPartitioner: Partitioners.DefaultPartitioner,
    retry: PATIENT_PRODUCER_RETRY,
  });
  await producer.connect();
  const out: Produced[] = [];
  try {
    for (let partition = 0; partition < PARTITIONS; partition++) {
      const values: string[] = [];
      for (let n = from + partition; n < from + count; n += PARTITIONS) values.push(logValue(n));
      const [meta] = await producer.send({
        topic,
        acks: -1,
        messages: values.map((value) => ({ partition, value })),
      });
      values.forEach((value, i) => out.push({ partition, offset: Number(meta!.baseOffset) + i, value }));
    }
  } finally {
    await producer.disconnect();
  }
  return out;
}

async function behind(admin: Admin, groupId: string, topic: string): Promise<number> {
  const ends = await admin.fetchTopicOffsets(topic);
  const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
  let lag = 0;
  for (const e of ends) {
    const at = Number(committed!.partitions.find((p) => p.partition === e.partition)?.offset ?? -1);
    lag += Number(e.high) - Math.max(0, at);
  }
  return lag;
}

async function tableKeys(lanceDir: string): Promise<string[]> {
  return (await readKeys(lanceDir, TABLE)).map(([partition, offset]) => `${partition}:${offset}`);
}

async function diskFullGauge(replica: ReplicaProcess, port: number, stage: DiskStage): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`kafka_lance_disk_full{stage="${stage}"}`));
  void replica;
  return line ? Number(line.split(' ').pop()) : Number.NaN;
}

/** One stage: fill, see the pause, free, see the resume and every record once. */
export async function runFullDisk(
  context: QualifyContext,
  stage: DiskStage,
  options: { forceInjection?: boolean } = {},
): Promise<StageOutcome> {
  // A directory of this run's own: a second run of a stage must not find the first one's table.
  await fsp.mkdir(context.workDir, { recursive: true });
  const work = await fsp.mkdtemp(path.join(context.workDir, `full-disk-${stage}-`));
  const fs = await smallFs(work, stage, 48 * 1024 * 1024, options);
  context.log(`full-disk[${stage}]: small file system by ${fs.method} at ${fs.dir}`);
  const kafka = new Kafka({
    clientId: `qualify-full-disk-${stage}`,
    brokers: [...context.brokers],
    logLevel: logLevel.NOTHING,
  });
  const admin = kafka.admin();
  await admin.connect();
  const checks: { check: string; ok: boolean; detail: string }[] = [];
  const check = (name: string, ok: boolean, detail: string) => {
    checks.push({ check: name, ok, detail });
    context.log(`full-disk[${stage}]: ${ok ? 'ok ' : 'FAIL'} ${name}: ${detail}`);
  };
  let replica: ReplicaProcess | undefined;
  try {
    const suffix = `${stage}-${context.seed}-${Date.now().toString(36)}`;
    const topic = `qualify-full-disk-${suffix}`;
    const name = `qfd${suffix.replace(/[^A-Za-z0-9]/g, '')}`;
    await createTopicReady(admin, topic, PARTITIONS);
    const dataDir = stage === 'staging' ? path.join(fs.dir, 'data') : path.join(work, 'data');
    const lanceDir = stage === 'lance' ? path.join(fs.dir, 'lance') : path.join(work, 'lance');
    const file = await writeConsumer(work, {
      name,
      topics: [topic],
      table: TABLE,
      fromBeginning: true,
      schema: {
        fields: {
          n: { type: 'int64', nullable: false },
          level: 'string',
          service: { type: 'string', nullable: false },
          message: 'string',
        },
      },
      deadLetter: { file: path.join(work, `${name}.dlq.jsonl`) },
      durabilityIntervalMs: 200,
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 1_000,
      workers: 2,
      staging: { maxPartAgeMs: 500 },
      lance: { uri: lanceDir },
      materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
    });
    const groupId = `kafka-lance-${name}`;
    replica = new ReplicaProcess(file, dataDir, context.brokers, fs.env);
    const port = await replica.metricsPort();
    await replica.waitForEvent('kafka.join');
    const batch = context.short ? 2_000 : 20_000;
    const produced: Produced[] = [...(await produce(kafka, topic, 0, batch))];
    await until(
      'the first records committed and published',
      async () =>
        (await behind(admin, groupId, topic)) === 0 && (await tableKeys(lanceDir)).length === batch
          ? true
          : undefined,
      120_000,
    );
    const rowsBefore = (await tableKeys(lanceDir)).length;

    await fs.fill();
    context.log(`full-disk[${stage}]: filled (${await fs.available()} bytes available)`);
    produced.push(...(await produce(kafka, topic, batch, batch)));
    const event = await replica.waitFor((l) => l.event === 'disk.full' && l.stage === stage, 60_000);
    check(
      'disk.full logged',
      true,
      `path ${String(event.path)}, operation ${String(event.operation)}, free ${String(event.freeBytes)} bytes`,
    );
    const gauge = await until(
      'the disk-full gauge',
      async () => ((await diskFullGauge(replica!, port, stage)) === 1 ? 1 : undefined),
      10_000,
    ).catch(() => 0);
    check(`kafka_lance_disk_full{stage="${stage}"} = 1 while full`, gauge === 1, `gauge ${gauge}`);
    // Hold the disk full for a while: the replica must wait, not die, not drop, not commit what is not durable.
    const holdMs = context.short ? 3_000 : 10_000;
    const heldFrom = Date.now();
    const lagAtPause = await behind(admin, groupId, topic);
    await sleep(holdMs);
    const lagAfterHold = await behind(admin, groupId, topic);
    const rowsWhileFull = (await tableKeys(lanceDir)).length;
    const exited = await Promise.race([replica.exited.then(() => true), sleep(10).then(() => false)]);
    check(
      'the replica stays up while the disk is full',
      !exited,
      exited ? 'it exited' : `alive after ${holdMs} ms`,
    );
    if (stage === 'staging') {
      check(
        'nothing committed past what is durable',
        lagAfterHold > 0 && lagAfterHold === lagAtPause,
        `uncommitted records: ${lagAtPause} at the pause, ${lagAfterHold} after ${holdMs} ms`,
      );
    }
    if (stage === 'lance')
      check(
        'no rows published while the Lance disk is full',
        rowsWhileFull === rowsBefore,
        `rows ${rowsBefore} before, ${rowsWhileFull} while full`,
      );
    const pauseLines = replica.logs.filter((l) => l.event === 'disk.full' && l.stage === stage).length;
    check('one disk.full event for the episode', pauseLines === 1, `${pauseLines} events`);

    await fs.free();
    const returned = await replica.waitFor(
      (l) => l.event === 'disk.space-returned' && l.stage === stage,
      60_000,
    );
    const pausedMs = Date.now() - heldFrom;
    check(
      'disk.space-returned logged after the space came back',
      true,
      `paused ${String(returned.pausedMs)} ms`,
    );
    produced.push(...(await produce(kafka, topic, 2 * batch, batch)));
    await until(
      'every record committed and published',
      async () =>
        (await behind(admin, groupId, topic)) === 0 && (await tableKeys(lanceDir)).length >= produced.length
          ? true
          : undefined,
      180_000,
    ).catch(() => undefined);
    await sleep(1_500); // a late duplicate would show
    const gaugeAfter = await diskFullGauge(replica, port, stage);
    check(
      `kafka_lance_disk_full{stage="${stage}"} = 0 after the resume`,
      gaugeAfter === 0,
      `gauge ${gaugeAfter}`,
    );
    const keys = await tableKeys(lanceDir);
    const unique = new Set(keys);
    const expected = new Set(produced.map((p) => `${p.partition}:${p.offset}`));
    const missing = [...expected].filter((k) => !unique.has(k)).length;
    const strangers = [...unique].filter((k) => !expected.has(k)).length;
    check(
      'every produced record in Lance exactly once',
      keys.length === produced.length && unique.size === keys.length && missing === 0 && strangers === 0,
      `${produced.length} produced, ${keys.length} rows, ${unique.size} distinct, ${missing} missing, ${strangers} never produced`,
    );
    const lag = await behind(admin, groupId, topic);
    check('committed offsets at the log end', lag === 0, `${lag} records uncommitted`);
    const stop = await replica.kill('SIGTERM');
    check('graceful stop after the episode', stop.code === 0, JSON.stringify(stop));
    return { stage, method: fs.method, checks, produced: produced.length, rows: keys.length, pausedMs };
  } finally {
    if (replica) await replica.kill('SIGKILL');
    await admin.disconnect();
    await fs.dispose();
  }
}

export const step: QualifyStep = {
  name: 'full-disk',
  title: 'Full disk: pause on ENOSPC, resume by itself, nothing lost',
  async run(context: QualifyContext): Promise<QualifyStepReport> {
    const outcomes: StageOutcome[] = [];
    const failures: string[] = [];
    for (const stage of ['staging', 'lance'] as const) {
      try {
        outcomes.push(await runFullDisk(context, stage));
      } catch (error) {
        failures.push(`${stage}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    const passed = failures.length === 0 && outcomes.every((o) => o.checks.every((c) => c.ok));
    const details: string[] = [
      '| stage | method | check | result | detail |',
      '| --- | --- | --- | --- | --- |',
    ];
    for (const o of outcomes)
      for (const c of o.checks)
        details.push(`| ${o.stage} | ${o.method} | ${c.check} | ${c.ok ? 'ok' : 'FAILED'} | ${c.detail} |`);
    for (const f of failures) details.push(`- failed to run: ${f}`);
    const summary = outcomes
      .map(
        (o) =>
          `${o.stage} on ${o.method}: paused ${(o.pausedMs / 1000).toFixed(1)} s, ${o.rows} rows for ${o.produced} produced`,
      )
      .join('; ');
    return {
      passed,
      summary: `${passed ? 'Passed' : 'FAILED'}: a replica whose staging or Lance directory was filled paused, logged disk.full, exported kafka_lance_disk_full, and resumed by itself once space returned. ${summary}.${failures.length ? ` Errors: ${failures.join('; ')}` : ''}`,
      details,
    };
  },
};
