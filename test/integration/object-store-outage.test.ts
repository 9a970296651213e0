import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { checkFaultRun, produceInBackground, settle, sleep, type Named } from '../support/faults';
import { testBrokers } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';
import type * as OnS3 from '../support/lancedb-on-s3';
import type * as S3Local from '../support/s3-local';
import { TEST_S3_PORT, s3DatabaseUri, s3Local, storageOptions } from '../support/s3-local';

/**
 * The object store goes away for 10 s during a run (publications fail every few
 * seconds while it is down, so that is several failed attempts): publications fail and are
 * retried, the replicas recover by themselves once it is back, nothing is lost or
 * duplicated, and the logs say what happened. This suite runs its own s3proxy (the
 * shared one's port + 1) so that stopping it cannot disturb another suite. Run after
 * `npm run build` (replicas run from dist/).
 */
const PORT = TEST_S3_PORT + 1;
const suite = brokerSuite('kl-s3-outage');
const PARTITIONS = 6;
const RECORDS = 18_000;

// support/faults.ts opens the table with `lancedb.connect(uri)`: give it this server.
jest.mock('@lancedb/lancedb', () => {
  const s3 = jest.requireActual<typeof S3Local>('../support/s3-local');
  return jest
    .requireActual<typeof OnS3>('../support/lancedb-on-s3')
    .lancedbOnS3(s3.storageOptions(s3.TEST_S3_PORT + 1));
});

function s3(command: 'start' | 'stop'): void {
  const result = s3Local(command, PORT);
  if (result.code !== 0) throw new Error(`s3-local ${command} on ${PORT}: ${result.output}`);
}

beforeAll(() => s3('start'), 180_000);
afterAll(() => s3('stop'), 60_000);
afterEach(async () => {
  await ReplicaProcess.killAll();
});

test('s3proxy stopped for 10 s mid-run: publications retry, every record exactly once, logs say what happened', async () => {
  const uri = s3DatabaseUri('outage');
  const { topic, groupId, file } = await topicAndConsumer(suite, PARTITIONS, {
    staging: { maxPartAgeMs: 500 },
    lance: { uri, storageOptions: storageOptions(PORT) },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const replicas: Named[] = [];
  for (const label of ['A', 'B']) {
    replicas.push({
      label,
      process: new ReplicaProcess(file, await tempDir(`kl-outage-${label}`), testBrokers()),
    });
  }
  for (const r of replicas) await r.process.waitForEvent('kafka.join');
  const production = produceInBackground(suite.kafka, topic, PARTITIONS, RECORDS, 12, 1_000);
  await replicas[0]!.process.waitForEvent('publication');
  const stoppedAt = Date.now();
  s3('stop');
  await sleep(10_000);
  s3('start');
  const outageMs = Date.now() - stoppedAt;
  await production.done;

  const settled = await settle(suite.admin, groupId, topic, uri, production.produced.length, {
    rowsTimeoutMs: 150_000,
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
  const events = (name: string) =>
    replicas.flatMap((r) =>
      r.process.logs.filter((l) => l.event === name && (l.time as number) >= stoppedAt),
    );
  const failed = [...events('publication.failed'), ...events('materializer.retry')];
  console.log(
    [
      `outage ${outageMs} ms; settled in ${settled.seconds} s; failed publication attempts during/after it: ${failed.length}; publications after it: ${events('publication').length}`,
      ...report.lines,
    ].join('\n'),
  );
  expect(report.problems).toEqual([]);
  // The outage really met publications: attempts failed and were retried.
  expect(failed.length).toBeGreaterThan(0);
  // Both replicas are still running: they recovered by themselves.
  for (const r of replicas) expect(r.process.logs.some((l) => l.event === 'replica.stopped')).toBe(false);
  expect(events('publication').length).toBeGreaterThan(0);
}, 240_000);
