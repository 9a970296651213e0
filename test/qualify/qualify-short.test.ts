import { spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { QualifyReport } from '../../qualify/run';
import { TEST_BROKER_PORT } from '../support/kafka-local';
import { testBrokers } from '../support/kafka';
import { TEST_S3_PORT } from '../support/s3-local';

const RUNNER = path.resolve(__dirname, '../../dist/qualify/run.js');
const CAMPAIGN_STEPS = ['kill-campaign', 'data-dir-loss', 'fuzz', 'routing'];

/**
 * The short variant of `npm run qualify` inside `npm test`: the campaign steps
 * with --short (smaller volumes, 3 kills, one zombie, fewer fuzz runs),
 * against the test broker jest started, run as `npm run qualify` runs it: the compiled
 * runner in a process of its own (a jest worker that had run other suites first ran out
 * of memory once with the steps in it). The independent reader's venv (pylance
 * from PyPI) is made on first use. Run after `npm run build`.
 *
 * The outage steps (broker-outage, s3-outage) run in `npm run qualify`; inside `npm test`
 * the same outages of two consuming replicas, with the same exactly-once check, are
 * test/integration/faults.test.ts ('broker restart while two replicas consume', on a
 * broker of its own) and test/integration/object-store-outage.test.ts (s3proxy stopped
 * for 10 s mid-run): here they cost a broker and an s3proxy of their own and ~100 s.
 *
 * The real-topic steps (compacted, transactional, retention, recreated, scale-down) run in
 * `npm run qualify`; inside `npm test` their mechanisms are proven by the integration
 * tests of the same hazards (topic-offset-gaps, recreated-topic, scale-down), which keeps
 * the suite near its time budget. The full-disk step runs in `npm test` as
 * test/integration/full-disk.test.ts: the same `runFullDisk` of the step, short, per stage,
 * with the same checks; running it here too would only run it twice.
 */
test('qualification, short variant: every step passes', async () => {
  const work = await fsp.mkdtemp(path.join(os.tmpdir(), 'kl-qualify-'));
  const seed = process.env.KAFKA_LANCE_QUALIFY_SEED ?? String(Date.now() % 1_000_000);
  const output: string[] = [];
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        RUNNER,
        '--short',
        '--only',
        CAMPAIGN_STEPS.join(','),
        '--seed',
        seed,
        '--out',
        work,
        '--work',
        work,
        '--brokers',
        testBrokers().join(','),
      ],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          ...process.env,
          KAFKA_LOCAL_PORT: String(TEST_BROKER_PORT), // a broker-outage step's own broker: this + 2
          KAFKA_LANCE_QUALIFY_S3_PORT: String(TEST_S3_PORT + 2),
        },
      },
    );
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => output.push(chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => output.push(chunk));
    child.on('error', reject);
    child.on('exit', (exitCode) => resolve(exitCode));
  });
  const reportText = await fsp.readFile(path.join(work, 'report.json'), 'utf8').catch(() => undefined);
  if (reportText === undefined) {
    // The runner ended before its report: what it printed is all there is to say why.
    console.log(output.join(''));
    throw new Error(`the qualification runner exited ${code} without a report (its output is above)`);
  }
  const report = JSON.parse(reportText) as QualifyReport;
  const markdown = await fsp.readFile(path.join(work, 'report.md'), 'utf8');
  if (!report.passed || code !== 0) console.log(`${output.join('')}\n\n${markdown}`);
  else console.log(report.steps.map((s) => `${s.name}: ${s.summary}`).join('\n'));
  for (const s of report.steps)
    expect({ step: s.name, passed: s.passed, summary: s.summary }).toEqual({
      step: s.name,
      passed: true,
      summary: s.summary,
    });
  expect(code).toBe(0);
  expect(report.steps.map((s) => s.name)).toEqual(CAMPAIGN_STEPS);
  // Every table was read by both readers.
  expect(markdown).toContain('pylance 12.0.0');
  if (report.passed) await fsp.rm(work, { recursive: true, force: true });
}, 900_000);
