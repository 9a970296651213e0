import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { brokerSuite, untilHosted } from '../support/broker-suite';
import { writeConsumer } from '../support/ingestion-fixture';
import { testBrokers, uniqueName } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';
import { runBounded } from '../support/run-bounded';
import type { InspectReport } from '../../src/cli/inspect';

const BIN = path.resolve(__dirname, '../../bin/kafka-lance');
const cli = (...args: string[]) => runBounded(process.execPath, [BIN, ...args]);

const APP_LOG_FIELDS = {
  ts: { type: 'timestamp', nullable: false },
  level: { type: 'string', nullable: false },
  service: { type: 'string', nullable: false },
  host: 'string',
  message: 'string',
  status: 'int32',
  latency_ms: 'float64',
  trace_id: 'string',
  attrs: 'json',
};

describe('produce, then a replica, then inspect', () => {
  const suite = brokerSuite('kl-cli-operate');
  const topic = uniqueName('produced');
  const COUNT = 2_000;
  const BAD_RATIO = 0.05;

  test('produce creates the topic and writes N records, the asked share of them undecodable', async () => {
    const out = cli(
      'produce',
      '--topic',
      topic,
      '--count',
      String(COUNT),
      '--bad-ratio',
      String(BAD_RATIO),
      '--record-bytes',
      '400',
      '--partitions',
      '3',
      '--brokers',
      testBrokers().join(','),
    );
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
    expect(out.stdout).toContain(`produced ${COUNT} records (${COUNT * BAD_RATIO} undecodable on purpose)`);
    await untilHosted(suite.admin, topic, 3);
    const ends = await suite.admin.fetchTopicOffsets(topic);
    expect(ends).toHaveLength(3);
    expect(ends.reduce((n, e) => n + Number(e.high), 0)).toBe(COUNT);

    // Read them back: count what a JSON consumer could not decode, and the size of the rest.
    const consumer = suite.kafka.consumer({ groupId: uniqueName('count-back') });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    let seen = 0;
    let bad = 0;
    let goodBytes = 0;
    await new Promise<void>((resolve, reject) => {
      consumer
        .run({
          eachMessage: async ({ message }) => {
            seen++;
            const text = message.value?.toString('utf8') ?? '';
            try {
              JSON.parse(text);
              goodBytes += Buffer.byteLength(text);
            } catch {
              bad++;
            }
            if (seen === COUNT) resolve();
            return Promise.resolve();
          },
        })
        .catch(reject);
    });
    await consumer.disconnect();
    expect(bad).toBe(COUNT * BAD_RATIO);
    const average = goodBytes / (COUNT - bad);
    expect(average).toBeGreaterThan(360);
    expect(average).toBeLessThan(440);
  }, 90_000);

  test('inspect --json after a real run: rows = produced - dead letters, offsets agree per partition', async () => {
    const name = uniqueName('insp').replace(/[^A-Za-z0-9_-]/g, '');
    const dataDir = path.join(suite.work, 'data');
    const file = await writeConsumer(suite.work, {
      name,
      topics: [topic],
      table: 'logs',
      schema: { fields: APP_LOG_FIELDS },
      deadLetter: { file: path.join(dataDir, 'dlq.jsonl') },
      durabilityIntervalMs: 200,
      staging: { maxPartAgeMs: 1_000 },
      materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
      sessionTimeoutMs: 6_000,
      heartbeatIntervalMs: 500,
      workers: 1,
    });
    const inspect = (): InspectReport => {
      const out = cli(
        'inspect',
        '-c',
        file,
        '--data-dir',
        dataDir,
        '--brokers',
        testBrokers().join(','),
        '--json',
      );
      expect(out.stderr).toBe('');
      expect(out.status).toBe(0);
      return JSON.parse(out.stdout) as InspectReport;
    };
    const replica = new ReplicaProcess(file, dataDir, testBrokers());
    let report = inspect();
    for (let i = 0; i < 60; i++) {
      if ((report.lance.rows ?? 0) + (report.deadLetters.count ?? 0) >= COUNT) break;
      await new Promise((r) => setTimeout(r, 1_000));
      report = inspect();
    }
    expect((await replica.kill('SIGTERM')).code).toBe(0);
    report = inspect();

    const dead = COUNT * BAD_RATIO;
    expect(report.deadLetters).toMatchObject({ sink: 'file', count: dead });
    expect(report.lance.exists).toBe(true);
    expect(report.lance.rows).toBe(COUNT - dead);
    expect(report.lance.fragments).toBeGreaterThanOrEqual(1);
    expect(report.partitions).toHaveLength(3);
    for (const p of report.partitions) {
      expect(p.committed).toBe(p.logEnd);
      expect(p.lag).toBe(0);
      expect(p.lanceMaxOffset).not.toBeNull();
      expect(p.lanceMaxOffset!).toBeLessThan(p.logEnd);
      // Only dead letters can follow the last published row of a partition.
      expect(p.logEnd - 1 - p.lanceMaxOffset!).toBeLessThanOrEqual(Math.ceil(1 / BAD_RATIO));
    }
    expect(report.partitions.reduce((n, p) => n + p.lanceRows, 0)).toBe(COUNT - dead);
    expect(report.partitions.reduce((n, p) => n + p.logEnd, 0)).toBe(COUNT);
    expect(report.staging.open.count + report.staging.sealed.count).toBe(0);
    expect(report.publications.writing).toBe(0);

    const human = cli('inspect', '-c', file, '--data-dir', dataDir, '--brokers', testBrokers().join(','));
    expect(human.status).toBe(0);
    expect(human.stdout).toContain(`${topic}[0]`);
    expect(human.stdout).toContain('Lance max _offset');
  }, 150_000);
});

describe('compact', () => {
  test('merges the fragments of many small adds and removes old versions', async () => {
    const dir = await tempDir('kl-compact');
    const uri = path.join(dir, 'lance');
    const db = await lancedb.connect(uri);
    const row = (i: number) => ({ _topic: 't', _partition: 0, _offset: i, message: `line ${i}` });
    const table = await db.createTable('logs', [row(0)]);
    for (let i = 1; i < 20; i++) await table.add([row(i)]);
    expect((await table.stats()).fragmentStats.numFragments).toBe(20);
    table.close();
    db.close();
    const file = await writeConsumer(dir, {
      name: 'compacted',
      topics: ['t'],
      table: 'logs',
      schema: 'infer',
    });

    const out = cli('compact', '-c', file, '--data-dir', dir, '--retention', '0s');
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
    expect(out.stdout).toMatch(/before: 20 fragments .*20 versions .*20 rows/);
    expect(out.stdout).toMatch(/after: {2}1 fragment .*, 20 rows/);

    const reopened = await (await lancedb.connect(uri)).openTable('logs');
    expect((await reopened.stats()).fragmentStats.numFragments).toBe(1);
    expect(await reopened.countRows()).toBe(20);
    expect((await reopened.listVersions()).length).toBeLessThan(20);
    reopened.close();
    await fsp.rm(dir, { recursive: true, force: true });
  });

  test('a table that does not exist yet: says nothing was published and where it would be', async () => {
    const dir = await tempDir('kl-compact-missing');
    const file = await writeConsumer(dir, { name: 'empty', topics: ['t'], table: 'logs', schema: 'infer' });
    const out = cli('compact', '-c', file, '--data-dir', dir);
    expect(out.status).toBe(1);
    expect(out.stderr).toContain('nothing has been published');
    expect(out.stderr).toContain(path.join(dir, 'lance', 'logs.lance'));
    // Reading must not create anything.
    expect(await fsp.readdir(dir)).toEqual(['empty.json']);
    await fsp.rm(dir, { recursive: true, force: true });
  });
});
