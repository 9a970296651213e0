import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { readReplicaLog } from '../../src/cli/scale-demo-verdict';
import { testBrokers } from '../support/kafka';
import { tempDir } from '../support/rows';

const BIN = path.resolve(__dirname, '../../bin/kafka-lance');

function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('kafka-lance scale-demo', () => {
  test('reads what a replica did from its JSON log lines', () => {
    const lines = [
      { event: 'staging.recovery', sealedParts: 2, recoveredParts: 1, tornParts: 0 },
      {
        event: 'kafka.join',
        assigned: [
          ['t', 3],
          ['t', 1],
          ['other', 0],
        ],
      },
      { event: 'publication', rows: 10 },
      {
        event: 'kafka.join',
        assigned: [
          ['t', 5],
          ['t', 2],
        ],
      },
      { event: 'publication', rows: 5 },
      { event: 'publication.recovery', id: 'x' },
    ];
    const text = `not json\n${lines.map((l) => JSON.stringify(l)).join('\n')}\n{"torn":`;
    expect(readReplicaLog(text, 't')).toEqual({
      joins: 2,
      assigned: [2, 5],
      publications: 2,
      rows: 15,
      recoveredPublications: 1,
      staging: { sealedParts: 2, recoveredParts: 1, tornParts: 0 },
    });
  });

  test('--help lists the options with an example', async () => {
    const out = await runCli(['scale-demo', '--help']);
    expect(out.code).toBe(0);
    for (const option of ['--seconds', '--rate', '--partitions', '--replicas', '--data-dir', '--brokers'])
      expect(out.stdout).toContain(option);
    expect(out.stdout).toContain('Example:');
    expect(out.stdout).toContain('kafka-lance scale-demo');
  });

  test('three replicas on 12 partitions, one killed and restarted: every record once', async () => {
    const dataDir = await tempDir('kl-scale-demo');
    const out = await runCli([
      'scale-demo',
      '--seconds',
      '20',
      '--rate',
      '1000',
      '--data-dir',
      dataDir,
      '--brokers',
      testBrokers().join(','),
    ]);
    // On a failure, the whole output says why.
    if (out.code !== 0) throw new Error(`exit ${String(out.code)}\n${out.stdout}\n${out.stderr}`);
    expect(out.stderr).toBe('');
    expect(out.stdout).toMatch(/replica-2 +data replica-2 .* killed \(SIGKILL\)/);
    expect(out.stdout).toMatch(/replica-4 +data replica-2 .* stopped \(SIGTERM\), exit 0/);
    expect(out.stdout).toContain('restart of replica-2 on its data dir');
    expect(out.stdout).toContain('Produced      20,000 log lines to app-logs-scale (100 broken on purpose)');
    expect(out.stdout).toContain('Dead letters  100 records in app-logs-scale.dlq');
    expect(out.stdout).toContain(
      'Check         19,900 rows of this run in Lance = 20,000 produced - 100 dead letters: yes',
    );
    expect(out.stdout).toContain('Duplicates    0 rows share a (_topic, _partition, _offset): none');
    expect(out.stdout).toContain('Committed     12 of 12 partitions committed at the log end: yes');
    expect(out.stdout).toMatch(
      /Staging +replica-2 0 open, 0 sealed, 0 unfinished publications: all published/,
    );
    // The inspect report of the shared table closes the summary.
    expect(out.stdout).toContain(`Lance table app_logs at ${path.join(dataDir, 'lance', 'app_logs.lance')}`);
    expect(out.stdout).toMatch(/app-logs-scale\[11\]/);
    expect(out.stdout).toContain('Every record once: yes');
  }, 300_000);
});
