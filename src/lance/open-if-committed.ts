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
