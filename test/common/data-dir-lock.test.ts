/**
 * Regression: two replicas on one data directory would publish
 * each other's parts. The data directory is locked for the life of a replica.
 */
import { spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DataDirLockedError, LOCK_FILE, lockDataDir } from '../../src/common/data-dir-lock';
import { processIdentity } from '../../src/common/process-identity';
import { tempDir } from '../support/rows';

const COMPILED = path.resolve(__dirname, '../../dist/src/common/data-dir-lock.js');

let dir: string;
beforeEach(async () => {
  dir = await tempDir('kl-lock');
});
afterEach(async () => {
  await fsp.rm(dir, { recursive: true, force: true });
});

/** A real second process that holds the lock on `dataDir` until killed. */
function holderProcess(dataDir: string) {
  const child = spawn(
    process.execPath,
    [
      '-e',
      `require(${JSON.stringify(COMPILED)}).lockDataDir(process.argv[1]).then(
         () => process.stdout.write('locked\\n'),
         (e) => { process.stderr.write(String(e)); process.exit(3); });
       setInterval(() => undefined, 1000);`,
      dataDir,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_c, s) => resolve(s)));
  const locked = new Promise<void>((resolve, reject) => {
    child.stdout.on('data', () => resolve());
    child.on('exit', (code) => reject(new Error(`holder exited with ${code}`)));
  });
  return { child, locked, exited };
}

describe('one replica per data directory', () => {
  test('a second lock attempt fails with an error naming the directory and the holder; release lets the next one in', async () => {
    const first = await lockDataDir(dir);
    const second = lockDataDir(dir);
    await expect(second).rejects.toBeInstanceOf(DataDirLockedError);
    await expect(lockDataDir(dir)).rejects.toThrow(
      new RegExp(`${dir.replace(/[/.-]/g, '\\$&')}.*pid ${process.pid}`),
    );
    await first.release();
    await expect(fsp.readdir(dir)).resolves.toEqual([]);
    const third = await lockDataDir(dir);
    await third.release();
  });

  test('a lock held by another live process is refused; once that process is SIGKILLed, its stale lock is taken over', async () => {
    const holder = holderProcess(dir);
    try {
      await holder.locked;
      const refused = lockDataDir(dir);
      await expect(refused).rejects.toBeInstanceOf(DataDirLockedError);
      await expect(lockDataDir(dir)).rejects.toMatchObject({
        context: { dataDir: dir, pid: holder.child.pid, hostname: os.hostname() },
      });
    } finally {
      holder.child.kill('SIGKILL');
    }
    expect(await holder.exited).toBe('SIGKILL');
    const lock = await lockDataDir(dir);
    const content = JSON.parse(await fsp.readFile(path.join(dir, LOCK_FILE), 'utf8')) as { pid: number };
    expect(content.pid).toBe(process.pid);
    await lock.release();
  });

  test("a lock file naming this process's pid that this process never took (a restarted container) is stale", async () => {
    await fsp.writeFile(
      path.join(dir, LOCK_FILE),
      JSON.stringify({ pid: process.pid, hostname: os.hostname(), startedAt: 0 }),
    );
    const lock = await lockDataDir(dir);
    await lock.release();
  });

  test('a lock naming a pid that another process has now (the holder died, its pid was reused) is stale, and that process is left alone', async () => {
    const other = spawn('sleep', ['30']);
    try {
      const now = processIdentity(other.pid!);
      expect(now?.startTicks).toEqual(expect.any(Number));
      const lockOf = (identity: object) =>
        fsp.writeFile(
          path.join(dir, LOCK_FILE),
          JSON.stringify({ pid: other.pid, hostname: os.hostname(), startedAt: 0, ...identity }),
        );
      // Written by that very process: live.
      await lockOf({ ...now });
      await expect(lockDataDir(dir)).rejects.toBeInstanceOf(DataDirLockedError);
      // Written by a process that started at another time, or in an earlier boot: stale.
      // Written before identities were kept: the pid alone, and that pid lives.
      await lockOf({});
      await expect(lockDataDir(dir)).rejects.toBeInstanceOf(DataDirLockedError);
      for (const identity of [
        { ...now, startTicks: now!.startTicks! - 1 },
        { ...now, bootId: 'an-earlier-boot' },
      ]) {
        await lockOf(identity);
        const lock = await lockDataDir(dir);
        await lock.release();
      }
      expect(other.exitCode).toBeNull();
      expect(other.signalCode).toBeNull();
    } finally {
      other.kill('SIGKILL');
    }
  });

  test('a lock held on another host is never guessed stale', async () => {
    await fsp.writeFile(
      path.join(dir, LOCK_FILE),
      JSON.stringify({ pid: 1, hostname: `${os.hostname()}-elsewhere`, startedAt: 0 }),
    );
    await expect(lockDataDir(dir)).rejects.toThrow(/elsewhere/);
  });
});

test('a replica refuses to start on a data directory another replica holds, before touching Kafka or the staging', async () => {
  const { Replica } = await import('../../src/replica/replica');
  const { silentLogger } = await import('../../src/common/logger');
  const consumerPath = path.join(dir, 'c.json');
  await fsp.writeFile(
    consumerPath,
    JSON.stringify({ name: 'locked', topics: ['t'], schema: { fields: { id: 'int64' } } }),
  );
  const dataDir = path.join(dir, 'data');
  const held = await lockDataDir(dataDir);
  await expect(
    Replica.start({
      consumerPath,
      // Nothing listens there: the lock must fail first.
      overrides: { dataDir, brokers: ['127.0.0.1:1'] },
      logger: silentLogger(),
    }),
  ).rejects.toBeInstanceOf(DataDirLockedError);
  await expect(fsp.readdir(dataDir)).resolves.toEqual([LOCK_FILE]);
  await held.release();
});
