import type * as OnS3 from '../support/lancedb-on-s3';
import type * as S3Local from '../support/s3-local';
import type * as DdbLocal from '../support/dynamodb-local';
import { brokerSuite, topicAndConsumer } from '../support/broker-suite';
import { DDB_COMMIT_TABLE, ddbEndpoint, ddbLocalSuite } from '../support/dynamodb-local';
import { checkFaultRun, produceInBackground, settle, sleep, type Named } from '../support/faults';
import { testBrokers } from '../support/kafka';
import { ReplicaProcess } from '../../src/harness/replica-process';
import { tempDir } from '../support/rows';
import { NON_ATOMIC_S3_PORT, NON_ATOMIC_S3_VERSION, S3_BUCKET, s3LocalSuite } from '../support/s3-local';
import { ulid } from 'ulid';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';

/**
 * `s3+ddb://`: Lance claims each version in a DynamoDB table with a conditional PutItem,
 * which makes a store without conditional writes (s3proxy 2.6.0) safe for several
 * writers. Real servers: s3proxy 2.6.0 and moto's DynamoDB server (deploy/s3-local,
 * deploy/dynamodb-local). Three replicas publish into one table there, one is SIGKILLed
 * after it published and comes back: every record exactly once. A missing commit table
 * stops the start, named. Run after `npm run build` (replicas run from dist/).
 */
const s3 = s3LocalSuite(NON_ATOMIC_S3_PORT, NON_ATOMIC_S3_VERSION);
ddbLocalSuite();
const suite = brokerSuite('kl-s3-ddb');
const storageOptions: Record<string, string> = { ...s3.storageOptions, dynamodb_endpoint: ddbEndpoint() };

jest.mock('@lancedb/lancedb', () => {
  const s3 = jest.requireActual<typeof S3Local>('../support/s3-local');
  const ddb = jest.requireActual<typeof DdbLocal>('../support/dynamodb-local');
  return jest.requireActual<typeof OnS3>('../support/lancedb-on-s3').lancedbOnS3({
    ...s3.storageOptions(s3.NON_ATOMIC_S3_PORT),
    dynamodb_endpoint: ddb.ddbEndpoint(),
  });
});

afterEach(async () => {
  await ReplicaProcess.killAll();
});

const ddbUri = (table: string) => `s3+ddb://${S3_BUCKET}/ddb-${ulid().toLowerCase()}?ddbTableName=${table}`;

test('a missing DynamoDB commit table stops the start, naming the table and the key schema Lance needs', async () => {
  const { file } = await topicAndConsumer(suite, 1, {
    lance: { uri: ddbUri('no-such-commit-table'), storageOptions },
  });
  const replica = new ReplicaProcess(file, await tempDir('kl-ddb-missing'), testBrokers());
  expect((await replica.exited).code).toBe(2);
  const said = replica.stderr.join('');
  expect(said).toContain('the DynamoDB commit table no-such-commit-table does not exist');
  expect(said).toContain('hash key base_uri (S) and range key version (N)');
}, 60_000);

/**
 * Credentials the configuration does not hold (a profile file here; an instance role or a
 * web identity token in a cluster): the start cannot sign its DescribeTable, so Lance,
 * which finds them itself, checks the commit table with two scratch commits.
 */
async function withProfileCredentials(): Promise<{
  env: NodeJS.ProcessEnv;
  options: Record<string, string>;
}> {
  const dir = await tempDir('kl-ddb-profile');
  const file = path.join(dir, 'credentials');
  await fsp.writeFile(
    file,
    `[kl]\naws_access_key_id = ${storageOptions.aws_access_key_id}\naws_secret_access_key = ${storageOptions.aws_secret_access_key}\n`,
  );
  const options = Object.fromEntries(
    Object.entries(storageOptions).filter(([k]) => !/^aws_(access_key_id|secret_access_key)$/.test(k)),
  );
  const env = {
    AWS_SHARED_CREDENTIALS_FILE: file,
    AWS_PROFILE: 'kl',
    AWS_EC2_METADATA_DISABLED: 'true',
  };
  return { env, options };
}

test('credentials found outside the configuration: a missing commit table still stops the start, checked through Lance, and an existing one passes', async () => {
  const { env, options } = await withProfileCredentials();
  const missing = await topicAndConsumer(suite, 1, {
    lance: { uri: ddbUri('no-such-commit-table'), storageOptions: options },
  });
  const refused = new ReplicaProcess(missing.file, await tempDir('kl-ddb-missing'), testBrokers(), env);
  expect((await refused.exited).code).toBe(2);
  const said = refused.stderr.join('');
  expect(said).toContain('the DynamoDB commit table no-such-commit-table does not exist');
  expect(said).toContain('checked by two commits through Lance');

  const present = await topicAndConsumer(suite, 1, {
    lance: { uri: ddbUri(DDB_COMMIT_TABLE), storageOptions: options },
  });
  const started = new ReplicaProcess(present.file, await tempDir('kl-ddb-present'), testBrokers(), env);
  const verdict = await started.waitForEvent('lance.store.probe');
  expect([verdict.atomic, verdict.basis, verdict.checkedBy]).toEqual([true, 'commit-table', 'lance-commits']);
}, 90_000);

test('three replicas publishing through s3+ddb:// on a store without conditional writes, one SIGKILLed: every record exactly once', async () => {
  const uri = ddbUri(DDB_COMMIT_TABLE);
  const { topic, groupId, file } = await topicAndConsumer(suite, 6, {
    staging: { maxPartAgeMs: 500 },
    lance: { uri, storageOptions },
    materializer: { maxPublicationDelayMs: 200, pollMs: 200 },
  });
  const replicas: Named[] = [];
  const dirs = [await tempDir('kl-ddb-a'), await tempDir('kl-ddb-b'), await tempDir('kl-ddb-c')];
  const start = (label: string, dir: string) => {
    const process = new ReplicaProcess(file, dir, testBrokers());
    replicas.push({ label, process });
    return process;
  };
  const [a, b, c] = [start('A', dirs[0]!), start('B', dirs[1]!), start('C', dirs[2]!)];
  for (const r of [a, b, c]) {
    // No probe: the commit table makes the store atomic, once it is there with Lance's keys.
    const verdict = await r.waitForEvent('lance.store.probe');
    expect([verdict.atomic, verdict.basis, verdict.checkedBy]).toEqual([
      true,
      'commit-table',
      'describe-table',
    ]);
  }
  const production = produceInBackground(suite.kafka, topic, 6, 12_000, 16, 400);
  await a.waitForEvent('publication');
  expect((await a.kill('SIGKILL')).signal).toBe('SIGKILL');
  await sleep(500);
  start('A2', dirs[0]!);
  await production.done;
  const settled = await settle(suite.admin, groupId, topic, uri, production.produced.length, {
    // A replica restarted after a SIGKILL publishes what its predecessor committed only
    // once it has started, checked the store and recovered: on a loaded machine that
    // takes more than a few seconds, and rows that are still coming are not missing.
    quietMs: 15_000,
    rowsTimeoutMs: 90_000,
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
  const publications = replicas.map((r) => r.process.logs.filter((l) => l.event === 'publication').length);
  console.log(
    [`settled in ${settled.seconds} s; publications ${publications.join('/')}`, ...report.lines].join('\n'),
  );
  if (report.problems.length > 0) {
    // What each replica did last, and what it said went wrong, for the failure's reader.
    for (const r of replicas) {
      const warned = r.process.logs.filter((l) => Number(l.level) >= 40).slice(-10);
      console.error(
        `${r.label}:\n${r.process.tail(12)}\nwarnings and errors:\n${warned.map((l) => JSON.stringify(l).slice(0, 600)).join('\n')}`,
      );
    }
  }
  expect(report.problems).toEqual([]);
  // Several replicas did commit into the table (else the commit table was never raced for).
  expect(publications.filter((n) => n > 0).length).toBeGreaterThan(1);
}, 210_000);
