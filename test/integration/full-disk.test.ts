/**
 * A full disk against a real replica and a real broker: the qualification step
 * (qualify/steps/full-disk.ts) in its short variant, once per stage. The small file
 * system is a tmpfs where this process may mount one, else the ENOSPC injection; the
 * test name cannot know in advance, so each run prints which one ran.
 * Run after `npm run build` (the replica runs from dist/).
 */
import { ReplicaProcess } from '../../src/harness/replica-process';
import { testBrokers } from '../support/kafka';
import { tempDir } from '../support/rows';
import { runFullDisk } from '../../qualify/steps/full-disk';
import type { QualifyContext } from '../../qualify/step';
import { promises as fsp } from 'node:fs';

let workDir: string;
beforeAll(async () => {
  workDir = await tempDir('kl-full-disk-int');
});
afterAll(async () => {
  await ReplicaProcess.killAll();
  await fsp.rm(workDir, { recursive: true, force: true });
});

const context = (): QualifyContext => ({
  brokers: testBrokers(),
  broker: {
    stop: () => Promise.reject(new Error('not used')),
    start: () => Promise.reject(new Error('not used')),
  },
  workDir,
  short: true,
  seed: 13,
  log: (line) => console.log(line),
});

test.each(['staging', 'lance'] as const)(
  'a full %s disk pauses the replica (disk.full, kafka_lance_disk_full = 1), which resumes by itself with every record once',
  async (stage) => {
    const outcome = await runFullDisk(context(), stage);
    console.log(`${stage}: ran on ${outcome.method}`);
    expect(outcome.checks.filter((c) => !c.ok)).toEqual([]);
    expect(outcome.rows).toBe(outcome.produced);
  },
  300_000,
);

// What CI gets without CAP_SYS_ADMIN: the same scenario on the ENOSPC injection seam.
test('a full staging disk by ENOSPC injection (no mount): the same pause and resume', async () => {
  const outcome = await runFullDisk(context(), 'staging', { forceInjection: true });
  expect(outcome.method).toBe('injection');
  expect(outcome.checks.filter((c) => !c.ok)).toEqual([]);
}, 300_000);
