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
