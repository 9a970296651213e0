import { spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { silentLogger } from '../../src/common/logger';
import { FileLocks, recoverTableStaging } from '../../src/staging';
import { payloadOf, readSealedRows, tempDir } from '../support/rows';

const CHILD = path.resolve(__dirname, '../../dist/test/support/staging-child.js');

/** Runs the staging child, SIGKILLs it after `killAfterMs`, returns the last durable offset it reported per partition. */
async function runAndKill(tableDir: string, killAfterMs: number): Promise<Map<number, number>> {
  const child = spawn(process.execPath, [CHILD, tableDir], { stdio: ['ignore', 'pipe', 'pipe'] });
  const durable = new Map<number, number>();
  let buffered = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    for (const line of lines) {
      const [, partition, offset] = line.split(' ');
      durable.set(Number(partition), Number(offset));
    }
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.on('exit', (_code, signal) => resolve(signal)),
  );
  // Kill only once it has reported something durable, at a random moment after that.
  while (durable.size < 2 && child.exitCode === null) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, killAfterMs));
  child.kill('SIGKILL');
  expect(await exited).toBe('SIGKILL');
  expect(stderr).toBe('');
  return durable;
}

describe('staging under SIGKILL', () => {
  test.each([1, 2, 3])(
    'a SIGKILLed child that was writing leaves parts from which exactly the synced batches are recovered (run %i)',
    async () => {
      const dir = await tempDir('kl-crash');
      try {
        const durable = await runAndKill(dir, 100 + Math.floor(Math.random() * 900));
        const report = await recoverTableStaging({
          tableDir: dir,
          locks: new FileLocks(),
          owner: 'recovery',
          logger: silentLogger(),
        });
        expect(report.quarantined).toEqual([]);
        const rows = await readSealedRows(dir);
        const seen = new Set<string>();
        for (const r of rows) {
          const key = `${r.partition}:${r.offset}`;
          expect(seen.has(key)).toBe(false);
          seen.add(key);
          expect(r.message).toBe(payloadOf('crash', r.partition, r.offset));
        }
        for (const [partition, offset] of durable) {
          expect(offset).toBeGreaterThan(0);
          for (let o = 0; o <= offset; o++) {
            if (!seen.has(`${partition}:${o}`))
              throw new Error(`durable record ${partition}:${o} was not recovered`);
          }
        }
      } finally {
        await fsp.rm(dir, { recursive: true, force: true });
      }
    },
  );
});
