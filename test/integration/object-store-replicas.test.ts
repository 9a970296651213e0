import type * as OnS3 from '../support/lancedb-on-s3';
import type * as S3Local from '../support/s3-local';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { checkFaultRun, produceInBackground, settle, sleep, type Named } from '../support/faults';
import { testBrokers } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';
import { s3DatabaseUri, s3LocalSuite } from '../support/s3-local';

/**
 * Replicas on different machines share one table on object storage with conditional
 * writes (s3proxy 4.0.0): their concurrent Lance commits race for the same versions and
 * Lance retries the losers, so every publication lands exactly once without a wait.
 * Three replicas in one group, 12 partitions, one s3:// table; one replica SIGKILLs
 * itself between its add and marking it published (KAFKA_LANCE_TEST_CRASH_AT=after-add),
 * another is SIGKILLed after it published; both come back, and a fourth replica joins
 * mid-run. A reader that opens the table fresh at the end finds every record exactly
 * once. Run after `npm run build` (replicas run from dist/).
 */
const s3 = s3LocalSuite();
const suite = brokerSuite('kl-s3-replicas');
const PARTITIONS = 12;
const RECORDS = 24_000;

// The end-of-run check (support/faults.ts) opens the table with `lancedb.connect(uri)`:
// in this file every connection gets the s3proxy options (jest's process.env is a copy,
// so the AWS variables LanceDB reads itself cannot be set from here).
jest.mock('@lancedb/lancedb', () => {
  const s3 = jest.requireActual<typeof S3Local>('../support/s3-local');
  return jest
    .requireActual<typeof OnS3>('../support/lancedb-on-s3')
    .lancedbOnS3(s3.storageOptions(s3.TEST_S3_PORT));
});

afterEach(async () => {
  await ReplicaProcess.killAll();
});

test('three replicas, one s3:// table on a store with conditional writes, SIGKILLs during publications, a replica added mid-run: every record exactly once', async () => {
  const uri = s3DatabaseUri('replicas');
  const { topic, groupId, file } = await topicAndConsumer(suite, PARTITIONS, {
    staging: { maxPartAgeMs: 500 },
    lance: { uri, storageOptions: s3.storageOptions },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const brokers = testBrokers();
  const dirs = [await tempDir('kl-s3-a'), await tempDir('kl-s3-b'), await tempDir('kl-s3-c')];
  const replicas: Named[] = [];
  const start = (label: string, dir: string, env: NodeJS.ProcessEnv = {}) => {
    const process = new ReplicaProcess(file, dir, brokers, env);
    replicas.push({ label, process });
    return process;
  };
  const a = start('A', dirs[0]!);
  const b = start('B', dirs[1]!);
  // C dies between its first add and marking it published.
  const c = start('C', dirs[2]!, { KAFKA_LANCE_TEST_CRASH_AT: 'after-add' });
  for (const r of [a, b]) {
    // The start probe races concurrent appends: none is lost on this store.
    const probe = await r.waitForEvent('lance.store.probe');
    expect([probe.atomic, probe.basis]).toEqual([true, 'probe']);
  }
  const metrics = await b.metricsText();
  expect(metrics).toMatch(/^kafka_lance_store_atomic_commits\{table="logs"\} 1$/m);
  const production = produceInBackground(suite.kafka, topic, PARTITIONS, RECORDS, 12, 500);

  expect((await c.exited).signal).toBe('SIGKILL');
  await a.waitForEvent('publication');
  expect((await a.kill('SIGKILL')).signal).toBe('SIGKILL');
  await sleep(1_000);
  // Both come back on their data directories: C finds its `writing` publication in the
  // table (one count) and marks it published; A resumes whatever it left.
  start('C2', dirs[2]!);
  start('A2', dirs[0]!);
  // And a fourth replica joins mid-run: a rebalance while publications run.
  await sleep(2_000);
  start('D', await tempDir('kl-s3-d'));
  await production.done;

  const settled = await settle(suite.admin, groupId, topic, uri, production.produced.length, {
    rowsTimeoutMs: 100_000,
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
  const failed = replicas.reduce(
    (n, r) => n + r.process.logs.filter((l) => l.event === 'publication.failed').length,
    0,
  );
  console.log(
    [`settled in ${settled.seconds} s; failed publications: ${failed}`, ...report.lines].join('\n'),
  );
  expect(report.problems).toEqual([]);
});
