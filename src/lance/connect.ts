import * as lancedb from '@lancedb/lancedb';

/** Where a table lives: the database's URI, the table's name, and the store's options. */
export interface LanceTarget {
  /** A local directory or an object store URI (s3://, gs://, az://). */
  readonly uri: string;
  readonly table: string;
  readonly storageOptions?: Readonly<Record<string, string>>;
}

/**
 * A connection to the database of `target`, with its storage options (copied: LanceDB
 * takes the object it is given).
 *
 * `latest` makes every read check for a newer version first: other replicas and the
 * compactor commit to the same table, and a handle that keeps an old version would
 * plan against rows that are no longer the table. Left off, a table's handle keeps the
 * version it opened or committed, which is what a creator checking its own create needs.
 */
export function connectTarget(
  target: LanceTarget,
  reads: 'latest' | 'as-opened',
): Promise<lancedb.Connection> {
  return lancedb.connect(target.uri, {
    ...(reads === 'latest' ? { readConsistencyInterval: 0 } : {}),
    ...(target.storageOptions ? { storageOptions: { ...target.storageOptions } } : {}),
  });
}

/** A connection lent by SharedConnections (or made for one use): `release` instead of closing it. */
export interface LentConnection {
  readonly db: lancedb.Connection;
  readonly release: () => void;
}

/**
 * One connection per database (URI, store options, read consistency) for every table of
 * a worker: with hundreds of tables, a connection each kept hundreds of object-store
 * clients. Closed when its last user releases it.
 */
export class SharedConnections {
  readonly #open = new Map<string, { db: Promise<lancedb.Connection>; users: number }>();

  async acquire(target: LanceTarget, reads: 'latest' | 'as-opened'): Promise<LentConnection> {
    const key = JSON.stringify([target.uri, reads, Object.entries(target.storageOptions ?? {}).sort()]);
    let entry = this.#open.get(key);
    if (!entry) {
      entry = { db: connectTarget(target, reads), users: 0 };
      this.#open.set(key, entry);
    }
    const held = entry;
    held.users += 1;
    let db: lancedb.Connection;
    try {
      db = await held.db;
    } catch (error) {
      held.users -= 1;
      if (this.#open.get(key) === held) this.#open.delete(key);
      throw error;
    }
    let released = false;
    return {
      db,
      release: () => {
        if (released) return;
        released = true;
        held.users -= 1;
        if (held.users > 0) return;
        if (this.#open.get(key) === held) this.#open.delete(key);
        try {
          db.close();
        } catch {
          // a call in flight: freed when collected (LanceTable.close)
        }
      },
    };
  }

  /** Databases connected now (their users hold them open). */
  get size(): number {
    return this.#open.size;
  }
}
