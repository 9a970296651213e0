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
 * all the same; a table listed but not committed yet fails the open, for the caller to
 * retry. For writers, which must never take an existing table for absent.
 */
export async function openTableConfirmed(
  db: lancedb.Connection,
  name: string,
): Promise<lancedb.Table | undefined> {
  if ((await db.tableNames()).includes(name)) return db.openTable(name);
  return db.openTable(name).catch((error: unknown) => {
    if (isTableNotFound(error, name)) return undefined;
    throw error;
  });
}
