/**
 * A replica's first publication into a table that another replica has already filled,
 * with the race that makes Lance commit the create over it forced: its listing and its
 * first open miss the table, and its create is an overwrite (what Lance commits in the
 * race). The process the restore-intent tests SIGKILL at a crash point
 * (KAFKA_LANCE_TEST_CRASH_AT) between the create and the restore.
 *
 *   node dist/test/support/create-over-child.js <lanceUri> <table> <restoreIntentFile>
 */
import type * as lancedb from '@lancedb/lancedb';
import { silentLogger } from '../../src/common/logger';
import { parseFaults } from '../../src/faults/faults';
import { shareFaults } from '../../src/faults/thread-faults';
import { LanceTable } from '../../src/lance/lance-table';
import {
  createsOverwrite,
  firstTimes,
  listsNothing,
  missesOpens,
  patchConnections,
} from './lance-store-races';
import { TEST_SCHEMA } from './rows';

async function main(): Promise<void> {
  shareFaults(parseFaults(process.env));
  const [uri, table, restoreIntent] = process.argv.slice(2);
  // Every connection of this process creates by overwriting, as Lance does when its commit finds the table.
  patchConnections((db) => createsOverwrite(db));
  const writer = await LanceTable.connect({ uri: uri!, table: table! }, silentLogger(), {
    restoreIntent: restoreIntent!,
  });
  const db = (writer as unknown as { db: lancedb.Connection }).db;
  listsNothing(db);
  missesOpens(db, firstTimes(1));
  await writer.ensureSchema(TEST_SCHEMA);
  writer.close();
  process.stdout.write('{"event":"test.created"}\n');
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
