import type * as lancedb from '@lancedb/lancedb';
import { errorMessage } from '../common/errors';

/**
 * The table when it exists, or undefined. A table being created is listed (its
 * directory is there) before its first version is committed, and opening it then
 * fails with "not found": that table does not exist yet, for the caller as for Lance.
 */
export async function openTableIfCommitted(
  db: lancedb.Connection,
  name: string,
): Promise<lancedb.Table | undefined> {
  if (!(await db.tableNames()).includes(name)) return undefined;
  try {
    return await db.openTable(name);
  } catch (error) {
    if (isTableNotFound(error, name)) return undefined;
    throw error;
  }
}

/** LanceDB's answer to opening a table that has no committed version (or none at all). */
export function isTableNotFound(error: unknown, name: string): boolean {
  return errorMessage(error).includes(`Table '${name}' was not found`);
}

/**
 * The table, or undefined when opening it says it is not there. A listing that lacks it
 * is not believed (a LIST can come back short under concurrent writes), so it is opened
 * all the same. A table listed without a committed version is not there either: a create
 * in flight elsewhere, or one killed before its first commit, whose directory stays for
 * ever (taken for "about to be committed", every publication of it was retried without
 * end). The caller creates it: a create that lands over a table another writer committed
 * meanwhile is found and its rows put back (table-creation.ts, restore-duty.ts), as for a
 * short listing.
 * For writers, which must never take a committed table for absent.
 */
export async function openTableConfirmed(
  db: lancedb.Connection,
  name: string,
): Promise<lancedb.Table | undefined> {
  return db.openTable(name).catch((error: unknown) => {
    if (isTableNotFound(error, name)) return undefined;
    throw error;
  });
}
