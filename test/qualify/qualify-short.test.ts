import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { runQualification, reportMarkdown } from '../../qualify/run';
import { TEST_BROKER_PORT } from '../support/kafka-local';
import { testBrokers } from '../support/kafka';
import { TEST_S3_PORT } from '../support/s3-local';

/**
 * The short variant of `npm run qualify` (issue 13) inside `npm test`: every step with
 * short=true (smaller volumes, 3 kills, one zombie, shorter outages), against the test
 * broker jest started. The broker-outage step gets a broker of its own (port + 2) and the
 * S3 outage an s3proxy of its own (S3 port + 2): stopping the shared ones would break the
 * suites running beside it. The independent reader's venv (pylance from PyPI) is made on
 * first use. Run after `npm run build` (replicas run from dist/).
 */
test('qualification, short variant: every step passes', async () => {
  const work = await fsp.mkdtemp(path.join(os.tmpdir(), 'kl-qualify-'));
  const lines: string[] = [];
  const report = await runQualification({
    short: true,
    seed: Number(process.env.KAFKA_LANCE_QUALIFY_SEED ?? Date.now() % 1_000_000),
    outDir: work,
    workDir: work,
    brokers: testBrokers(),
    brokerPort: TEST_BROKER_PORT,
    ownBrokerPort: TEST_BROKER_PORT + 2,
    s3Port: TEST_S3_PORT + 2,
    log: (line) => lines.push(line),
  });
  const markdown = reportMarkdown(report);
  if (!report.passed) console.log(`${lines.join('\n')}\n\n${markdown}`);
  else console.log(report.steps.map((s) => `${s.name}: ${s.summary}`).join('\n'));
  for (const s of report.steps)
    expect({ step: s.name, passed: s.passed, summary: s.summary }).toEqual({
      step: s.name,
      passed: true,
      summary: s.summary,
    });
  expect(report.steps.map((s) => s.name)).toEqual(
    expect.arrayContaining([
      'kill-campaign',
      'broker-outage',
      's3-outage',
      'data-dir-loss',
      'full-disk',
      'fuzz',
    ]),
  );
  // The report reads both tables' readers.
  expect(markdown).toContain('pylance 12.0.0');
  if (report.passed) await fsp.rm(work, { recursive: true, force: true });
}, 900_000);
