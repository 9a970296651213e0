import * as lancedb from '@lancedb/lancedb';
import type * as OnS3 from '../support/lancedb-on-s3';
import type * as S3Local from '../support/s3-local';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { checkFaultRun, produceInBackground, settle, sleep, type Named } from '../support/faults';
import { testBrokers } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';
import { NON_ATOMIC_S3_PORT, NON_ATOMIC_S3_VERSION, s3DatabaseUri, s3LocalSuite } from '../support/s3-local';

/**
 * A store without conditional writes (s3proxy 2.6.0 overwrites on `If-None-Match: *`):
 * several writers lose commits there, so a replica refuses to publish, naming the two
 * fixes; a replica declared the table's only writer (lance.singleWriter) publishes, and
 * loses nothing, also through a SIGKILL and its own scheduled compactions. Run after
 * `npm run build` (replicas run from dist/).
 */
const s3 = s3LocalSuite(NON_ATOMIC_S3_PORT, NON_ATOMIC_S3_VERSION);
const suite = brokerSuite('kl-s3-non-atomic');

// The end-of-run check opens the table with `lancedb.connect(uri)`: point it at this store.
jest.mock('@lancedb/lancedb', () => {
  const s3 = jest.requireActual<typeof S3Local>('../support/s3-local');
  return jest
    .requireActual<typeof OnS3>('../support/lancedb-on-s3')
    .lancedbOnS3(s3.storageOptions(s3.NON_ATOMIC_S3_PORT));
});

afterEach(async () => {
  await ReplicaProcess.killAll();
});

test('on a store that loses racing commits a replica refuses to publish, naming conditional writes, s3+ddb:// and lance.singleWriter', async () => {
  const uri = s3DatabaseUri('refused');
  const { file } = await topicAndConsumer(suite, 2, { lance: { uri, storageOptions: s3.storageOptions } });
  const replica = new ReplicaProcess(file, await tempDir('kl-s3-refused'), testBrokers());
  const exit = await replica.exited;
  const said = replica.stderr.join('');
  expect(exit.code).toBe(2);
  expect(said).toContain('lance.uri');
  expect(said).toContain('conditional writes');
  expect(said).toContain('s3+ddb://');
  expect(said).toContain('lance.singleWriter');
  const probe = replica.logs.find((l) => l.event === 'lance.store.probe');
  expect([probe?.atomic, probe?.basis]).toEqual([false, 'probe']);
  // Nothing was published: the table was never created (the probe's scratch tables are gone).
  const db = await lancedb.connect(uri);
  expect(await db.tableNames()).toEqual([]);
  db.close();
}, 60_000);

test('a replica declared the only writer publishes on that store, through a SIGKILL and its own compactions: every record exactly once', async () => {
  const uri = s3DatabaseUri('single');
  const { topic, groupId, file } = await topicAndConsumer(suite, 4, {
    staging: { maxPartAgeMs: 500 },
    lance: { uri, storageOptions: s3.storageOptions, singleWriter: true },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200, optimizeEveryMs: 1_000 },
  });
  const dir = await tempDir('kl-s3-single');
  const replicas: Named[] = [];
  const start = (label: string) => {
    const process = new ReplicaProcess(file, dir, testBrokers());
    replicas.push({ label, process });
    return process;
  };
  const first = start('A');
  const declared = await first.waitForEvent('lance.store.singleWriter');
  expect(declared.basis).toBe('probe');
  const metrics = await first.metricsText();
  expect(metrics).toMatch(/^kafka_lance_store_atomic_commits\{table="logs"\} 0$/m);
  const production = produceInBackground(suite.kafka, topic, 4, 8_000, 16, 500);
  await first.waitForEvent('publication');
  expect((await first.kill('SIGKILL')).signal).toBe('SIGKILL');
  await sleep(500);
  const second = start('A2');
  await production.done;
  const settled = await settle(suite.admin, groupId, topic, uri, production.produced.length, {
    quietMs: 5_000,
    rowsTimeoutMs: 60_000,
  });
  const report = await checkFaultRun({
    admin: suite.admin,
    groupId,
    topic,
    lanceDir: uri,
    produced: production.produced,
    replicas,
    problems: settled.problems,
  });
  const compactions = replicas.reduce(
    (n, r) => n + r.process.logs.filter((l) => l.event === 'lance.optimized').length,
    0,
  );
  console.log([`settled in ${settled.seconds} s; compactions: ${compactions}`, ...report.lines].join('\n'));
  expect(report.problems).toEqual([]);
  // Its scheduled compaction ran on this store (between its own publications).
  expect(compactions).toBeGreaterThan(0);
  expect(second.logs.some((l) => l.event === 'lance.store.singleWriter')).toBe(true);
}, 150_000);
