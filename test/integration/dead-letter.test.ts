import { promises as fsp } from 'node:fs';
import { ConfigResourceTypes } from 'kafkajs';
import { brokerSuite, topicAndConsumer, untilHosted } from '../support/broker-suite';
import { logValue, readStaged } from '../support/ingestion-fixture';
import { testBrokers, uniqueName } from '../support/kafka';
import { ReplicaProcess, type LogLine } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';

/**
 * Dead letters that cannot be written, and definitions that dead-letter (nearly)
 * everything, against the real broker: the partition concerned stops (paused,
 * commits held below its first unhandled record), the others go on, the stop is
 * logged and exported, and a graceful stop still ends within seconds.
 */
const suite = brokerSuite('kl-dlq');
const { kafka } = suite;

const setup = (partitions: number, extra: Record<string, unknown> = {}) =>
  topicAndConsumer(suite, partitions, {
    staging: { maxPartBytes: 8 * 1024 * 1024, maxPartAgeMs: 1_000 },
    materializer: { enabled: false },
    ...extra,
  });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Produces these values to one partition, in order (acks=-1); returns their offsets. */
async function produceTo(topic: string, partition: number, values: readonly (string | Buffer)[]) {
  const producer = kafka.producer({ maxInFlightRequests: 1 });
  await producer.connect();
  try {
    const [meta] = await producer.send({
      topic,
      acks: -1,
      messages: values.map((value) => ({ partition, value })),
    });
    const base = Number(meta!.baseOffset);
    return values.map((_, i) => base + i);
  } finally {
    await producer.disconnect();
  }
}

async function committed(groupId: string, topic: string): Promise<Map<number, number>> {
  const [c] = await suite.admin.fetchOffsets({ groupId, topics: [topic] });
  return new Map(c!.partitions.map((p) => [p.partition, Number(p.offset)]));
}

async function waitForCommitted(groupId: string, topic: string, partition: number, offset: number) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const at = (await committed(groupId, topic)).get(partition);
    if (at === offset) return;
    if (Date.now() > deadline) throw new Error(`partition ${partition} committed ${at}, expected ${offset}`);
    await sleep(200);
  }
}

async function metricLines(replica: ReplicaProcess, name: string): Promise<string[]> {
  const port = await replica.metricsPort();
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith(`${name}{`));
}

const stoppedLine = (topic: string, partition: number) => (l: LogLine) =>
  l.event === 'partition.stopped' && l.topic === topic && l.partition === partition;

/** SIGTERM, and how long the replica took to exit. */
async function timedStop(replica: ReplicaProcess) {
  const started = Date.now();
  const exit = await replica.kill('SIGTERM');
  return { exit, seconds: (Date.now() - started) / 1000 };
}

/**
 * A dead letter that cannot be written, shared by both triggers: partition 0 holds one bad record between good
 * ones, partition 1 only good ones. The dead letter cannot be written, so partition 0
 * stops at the bad record while partition 1 goes on (also after the stop).
 */
async function unwritableDeadLetter(dlq: string, label: string, badValue: Buffer) {
  const { topic, groupId, file } = await setup(2, { deadLetter: { topic: dlq } });
  const goods = (from: number, n: number) => Array.from({ length: n }, (_, i) => logValue(from + i));
  await produceTo(topic, 0, goods(0, 10));
  const [bad] = await produceTo(topic, 0, [badValue]);
  await produceTo(topic, 0, goods(100, 10));
  await produceTo(topic, 1, goods(200, 20));

  const dir = await tempDir(`kl-${label}`);
  const replica = new ReplicaProcess(file, dir, testBrokers());
  const stopped = await replica.waitFor(stoppedLine(topic, 0), 60_000);
  expect(stopped).toMatchObject({ topic, partition: 0, offset: bad, reason: 'dead-letter-write-failed' });
  expect(String(stopped.sink)).toContain(dlq);
  expect(String(stopped.cause).length).toBeGreaterThan(0);
  expect(stopped.level).toBeGreaterThanOrEqual(50); // an error, not a warning

  // The other partition keeps being consumed after the stop.
  await waitForCommitted(groupId, topic, 1, 20);
  await produceTo(topic, 1, goods(300, 5));
  await waitForCommitted(groupId, topic, 1, 25);
  // Nothing at or past the unwritten dead letter is committed.
  await sleep(1_000);
  expect((await committed(groupId, topic)).get(0)).toBe(bad);
  const gauge = await metricLines(replica, 'kafka_lance_partition_stopped');
  expect(gauge.find((l) => l.includes(`topic="${topic}"`) && l.includes('partition="0"'))).toMatch(
    /reason="dead-letter-write-failed".* 1$/,
  );
  expect(gauge.some((l) => l.includes('partition="1"'))).toBe(false);

  const { exit, seconds } = await timedStop(replica);
  expect(exit).toEqual({ code: 0, signal: null });
  expect(seconds).toBeLessThan(10);
  // The graceful stop's last commit is held too: a restart starts at the bad record.
  expect((await committed(groupId, topic)).get(0)).toBe(bad);
  const staged = await readStaged([dir], 'logs');
  expect(staged.filter((r) => r.partition === 1)).toHaveLength(25);
  expect(staged.some((r) => r.partition === 0 && r.offset === bad)).toBe(false);
  return { topic, groupId, file, dir, bad: bad! };
}

/** Once the cause is fixed, a restarted replica writes the dead letter and moves on: nothing was lost. */
async function restartWritesIt(
  run: { topic: string; groupId: string; file: string; dir: string },
  dlq: string,
) {
  const replica = new ReplicaProcess(run.file, run.dir, testBrokers());
  await waitForCommitted(run.groupId, run.topic, 0, 21);
  expect(replica.logs.some((l) => l.event === 'partition.stopped')).toBe(false);
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  const [end] = await suite.admin.fetchTopicOffsets(dlq);
  expect(Number(end!.high)).toBe(1);
}

test('a dead letter larger than the DLQ topic max.message.bytes stops only its partition, is reported, stop() returns within seconds, and a restart after the fix writes it', async () => {
  const dlq = uniqueName('dlq-small');
  await suite.admin.createTopics({
    topics: [{ topic: dlq, numPartitions: 1, configEntries: [{ name: 'max.message.bytes', value: '1024' }] }],
    waitForLeaders: true,
  });
  await untilHosted(suite.admin, dlq, 1);
  // Not JSON, and larger than the DLQ topic accepts (MESSAGE_TOO_LARGE: never retried).
  const run = await unwritableDeadLetter(dlq, 'dlq-small', Buffer.alloc(8 * 1024, 0x61));
  await suite.admin.alterConfigs({
    validateOnly: false,
    resources: [
      {
        type: ConfigResourceTypes.TOPIC,
        name: dlq,
        configEntries: [{ name: 'max.message.bytes', value: '65536' }],
      },
    ],
  });
  await restartWritesIt(run, dlq);
});

test('a DLQ topic that does not exist stops the partition with the bad record (never auto-created), stop() returns within seconds, and a restart after the fix writes it', async () => {
  const dlq = uniqueName('dlq-missing');
  const run = await unwritableDeadLetter(dlq, 'dlq-missing', Buffer.from('{"n": 1, "service": '));
  expect(await suite.admin.listTopics()).not.toContain(dlq);
  await suite.admin.createTopics({ topics: [{ topic: dlq, numPartitions: 1 }], waitForLeaders: true });
  await untilHosted(suite.admin, dlq, 1);
  await restartWritesIt(run, dlq);
});

/** The fixture's records against a definition whose required `svc` field is a typo for `service`. */
const typoSchema = {
  fields: {
    n: { type: 'int64', nullable: false },
    level: 'string',
    svc: { type: 'string', nullable: false },
    message: 'string',
  },
};

test('a definition whose declared field matches nothing stops the partition and names the reason and the field; fixed, a restart stages every record', async () => {
  const { topic, groupId, file } = await setup(1, { schema: typoSchema });
  await produceTo(
    topic,
    0,
    Array.from({ length: 3_000 }, (_, i) => logValue(i)),
  );
  const dir = await tempDir('kl-typo');
  const replica = new ReplicaProcess(file, dir, testBrokers());
  const stopped = await replica.waitFor(stoppedLine(topic, 0), 60_000);
  expect(stopped).toMatchObject({
    topic,
    partition: 0,
    reason: 'dead-letter-ratio-exceeded',
    commonReason: 'schema-mismatch',
    commonField: 'svc',
  });
  expect(String(stopped.msg)).toContain('svc');
  expect(stopped.level).toBeGreaterThanOrEqual(50);
  // The first record was already bad: no commit moves past it, so a fixed definition re-reads everything.
  await sleep(1_000);
  expect((await committed(groupId, topic)).get(0)).toBe(0);
  const gauge = await metricLines(replica, 'kafka_lance_partition_stopped');
  expect(gauge.find((l) => l.includes(`topic="${topic}"`))).toMatch(
    /reason="dead-letter-ratio-exceeded".* 1$/,
  );
  const { exit, seconds } = await timedStop(replica);
  expect(exit).toEqual({ code: 0, signal: null });
  expect(seconds).toBeLessThan(10);
  expect((await committed(groupId, topic)).get(0)).toBe(0);

  // The definition fixed, a restart stages every record, the ones dead-lettered before the stop included.
  const definition = JSON.parse(await fsp.readFile(file, 'utf8')) as Record<string, unknown>;
  await fsp.writeFile(
    file,
    JSON.stringify({
      ...definition,
      schema: { fields: { ...typoSchema.fields, svc: undefined, service: 'string' } },
    }),
  );
  const fixed = new ReplicaProcess(file, dir, testBrokers());
  await waitForCommitted(groupId, topic, 0, 3_000);
  expect(await fixed.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  const staged = await readStaged([dir], 'logs');
  expect(new Set(staged.map((r) => r.offset)).size).toBe(3_000);
});

test("with errors.tolerance 'all' the same definition dead-letters every record, commits, and keeps going", async () => {
  const { topic, groupId, file, name } = await setup(1, { schema: typoSchema, errors: { tolerance: 'all' } });
  await produceTo(
    topic,
    0,
    Array.from({ length: 3_000 }, (_, i) => logValue(i)),
  );
  const replica = new ReplicaProcess(file, await tempDir('kl-typo-all'), testBrokers());
  await waitForCommitted(groupId, topic, 0, 3_000);
  expect(replica.logs.some((l) => l.event === 'partition.stopped')).toBe(false);
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  const lines = (await fsp.readFile(`${suite.work}/${name}.dlq.jsonl`, 'utf8')).trim().split('\n');
  expect(new Set(lines.map((l) => (JSON.parse(l) as { offset: number }).offset)).size).toBe(3_000);
});

test('many small dead letters that together exceed the DLQ topic max.message.bytes are sent in smaller batches, not a stopped partition', async () => {
  const dlq = uniqueName('dlq-batch');
  await suite.admin.createTopics({
    topics: [{ topic: dlq, numPartitions: 1, configEntries: [{ name: 'max.message.bytes', value: '4096' }] }],
    waitForLeaders: true,
  });
  await untilHosted(suite.admin, dlq, 1);
  // Every record bad: tolerance 'all', or the ratio safeguard would rightly stop the partition.
  const { topic, groupId, file } = await setup(1, {
    deadLetter: { topic: dlq },
    errors: { tolerance: 'all' },
  });
  // 200 bad records of ~100 bytes: each fits the DLQ topic, one batch of them does not.
  await produceTo(
    topic,
    0,
    Array.from({ length: 200 }, (_, i) => `not json ${i} ${'x'.repeat(90)}`),
  );
  const replica = new ReplicaProcess(file, await tempDir('kl-dlq-batch'), testBrokers());
  await waitForCommitted(groupId, topic, 0, 200);
  expect(replica.logs.some((l) => l.event === 'partition.stopped')).toBe(false);
  expect(await replica.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  const [end] = await suite.admin.fetchTopicOffsets(dlq);
  expect(Number(end!.high)).toBeGreaterThanOrEqual(200);
});
