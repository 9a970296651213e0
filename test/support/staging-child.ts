/**
 * A process that stages records as fast as it can until it is killed: used by the
 * SIGKILL tests. It prints `durable <partition> <offset>` after every sync, the only
 * facts the parent may rely on once the process is dead.
 *
 *   node dist/test/support/staging-child.js <tableDir>
 */
import { ulid } from 'ulid';
import { silentLogger } from '../../src/common/logger';
import { parseTpKey, recordOffset } from '../../src/common/offsets';
import { FileLocks, TableStaging, minuteKeyOf } from '../../src/staging';
import { rowsFor, range } from './rows';

const TOPIC = 'crash';

async function main(): Promise<void> {
  const tableDir = process.argv[2]!;
  const staging = await TableStaging.open({
    tableDir,
    table: 'crash',
    locks: new FileLocks(),
    owner: 'child',
    logger: silentLogger(),
    maxPartBytes: 256 * 1024,
    maxPartAgeMs: 200,
    epoch: { owner: ulid(), epoch: 1 },
  });
  const next = [0, 0];
  const start = Date.now();
  for (let tick = 0; ; tick++) {
    for (let i = 0; i < 8; i++) {
      const partition = (tick + i) % 2;
      const n = 1 + ((tick * 7 + i * 13) % 60);
      const from = next[partition]!;
      // Two minutes in flight at once, like event time around a minute boundary.
      const minute = minuteKeyOf(start + ((tick + i) % 3) * 60_000);
      staging.push({
        topic: TOPIC,
        partition,
        batch: rowsFor(TOPIC, partition, range(from, from + n)),
        minute,
        handledThrough: recordOffset(from + n - 1),
      });
      next[partition] = from + n;
    }
    const durable = await staging.sync();
    const lines = [...durable].map(([key, offset]) => `durable ${parseTpKey(key).partition} ${offset}`);
    process.stdout.write(`${lines.join('\n')}\n`);
    if (tick % 5 === 4) await staging.flush();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
