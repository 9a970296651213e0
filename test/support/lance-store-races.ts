/**
 * The store races a table's creation can meet, put on a LanceDB connection where a test
 * wants them: a listing that comes back short, an open that misses the table, and the
 * create Lance commits over a table its commit finds there (an Overwrite). Used in jest
 * and in the child processes the restore tests SIGKILL, so nothing here needs jest.
 */
import type * as lancedb from '@lancedb/lancedb';
import * as connectModule from '../../src/lance/connect';

/** The connection's listings never show a table, as an eventually consistent LIST can. */
export function listsNothing(db: lancedb.Connection): void {
  db.tableNames = () => Promise.resolve([]);
}

/** The connection's opens fail as "not found" while `miss()` says so (it is asked once per open). */
export function missesOpens(db: lancedb.Connection, miss: () => boolean): void {
  const open = db.openTable.bind(db);
  db.openTable = (name, ...rest) =>
    miss() ? Promise.reject(new Error(`Table '${name}' was not found`)) : open(name, ...rest);
}

/**
 * The connection's creates overwrite, as Lance commits a create that finds the table.
 * `then` runs after the create committed (to fail it as a store that lost its answer).
 */
export function createsOverwrite(db: lancedb.Connection, then?: () => void): void {
  const create = db.createEmptyTable.bind(db);
  db.createEmptyTable = async (name, schema, options) => {
    const table = await create(name, schema, { ...options, mode: 'overwrite' });
    then?.();
    return table;
  };
}

/** `n` answers of yes, then no: the first `n` calls of a race. */
export function firstTimes(n: number): () => boolean {
  let left = n;
  return () => left-- > 0;
}

/**
 * Puts `patch` on every connection LanceTable and table creation open through
 * connectTarget, until the returned function is called. The module's export is a plain
 * property that every caller reads at each call, so replacing it reaches them all.
 */
export function patchConnections(patch: (db: lancedb.Connection) => void): () => void {
  const connect = connectModule.connectTarget;
  const patched: typeof connect = async (target, reads) => {
    const db = await connect(target, reads);
    patch(db);
    return db;
  };
  const set = (value: typeof connect) =>
    Object.defineProperty(connectModule, 'connectTarget', { value, configurable: true, writable: true });
  set(patched);
  return () => set(connect);
}
