import { spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { QualifyReport } from '../../qualify/run';
import { testBrokers } from '../support/kafka';
import { schemaRegistrySuite, TEST_SCHEMA_REGISTRY_PORT } from '../support/schema-registry-local';

const RUNNER = path.resolve(__dirname, '../../dist/qualify/run.js');

schemaRegistrySuite();

/**
 * The short variant of the `hostile-input` qualification step inside `npm test`: a real
 * replica per format (JSON, Avro, Protobuf, JSON Schema), with the StatefulSet's memory
 * limit, consumes good records mixed with schema-id churn, schema bombs, header floods,
 * deep nesting, giant values, NaN/Infinity, wrong-length vectors, invalid UTF-8, keys that
 * change type and records at the broker's maximum size; it must never exit, stay under the
 * limit, commit to the log end within a minute of the end of production, and turn every
 * record into a row (read back by pylance) or a dead letter with a reason. Run as
 * `npm run qualify` runs it (the compiled runner, a process of its own), against the test
 * broker and the suites' registry. The seed is printed; KAFKA_LANCE_QUALIFY_SEED replays one.
 */
test('hostile input, short variant: no record stops a partition, exhausts the replica or is lost', async () => {
  const work = await fsp.mkdtemp(path.join(os.tmpdir(), 'kl-hostile-'));
  const seed = process.env.KAFKA_LANCE_QUALIFY_SEED ?? String(Date.now() % 1_000_000);
  const output: string[] = [];
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        RUNNER,
        '--short',
        '--only',
        'hostile-input',
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
        env: { ...process.env, KAFKA_LANCE_QUALIFY_REGISTRY_PORT: String(TEST_SCHEMA_REGISTRY_PORT) },
      },
    );
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => output.push(chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => output.push(chunk));
    child.on('error', reject);
    child.on('exit', (exitCode) => resolve(exitCode));
  });
  const reportText = await fsp.readFile(path.join(work, 'report.json'), 'utf8').catch(() => undefined);
  if (reportText === undefined) {
    console.log(output.join(''));
    throw new Error(`the qualification runner exited ${code} without a report (its output is above)`);
  }
  const report = JSON.parse(reportText) as QualifyReport;
  const markdown = await fsp.readFile(path.join(work, 'report.md'), 'utf8');
  if (!report.passed || code !== 0) console.log(`seed ${seed}\n${output.join('')}\n\n${markdown}`);
  else console.log(`seed ${seed}: ${report.steps.map((s) => s.summary).join('\n')}`);
  expect(report.steps.map((s) => ({ step: s.name, passed: s.passed, summary: s.summary }))).toEqual([
    { step: 'hostile-input', passed: true, summary: report.steps[0]?.summary },
  ]);
  expect(code).toBe(0);
  if (report.passed) await fsp.rm(work, { recursive: true, force: true });
}, 900_000);
